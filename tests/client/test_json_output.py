"""`safedb call --json` is safe to let reach a terminal: server text arrives escaped, and exactly as sent.

The feature server (a process of its own) echoes text full of terminal controls and invisible characters;
`safedb call --json` runs as a process, and its stdout is checked character by character.
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from tests.client.test_commands import safedb

HOSTILE = (
    "8-bit CSI \x9b2J, next line \x85, OSC \x9d0;title\x9c, ESC \x1b[31m, DEL \x7f, "
    "bidi \u202eevil\u202c \u2067isolate\u2069 \u200f, hidden \u200b\u2060\u00ad\U000e0041\U000e0042, "
    "lines\u2028and\u2029paragraphs, spaces \u00a0\u3000; kept as written: caf\u00e9 \u65e5\u672c \u2713"
)


def _unsafe(output: str) -> list[str]:
    """Characters a terminal would act on or draw as nothing (controls, format and separator characters, private use,
    unassigned), apart from the line breaks and spaces that lay out the JSON."""
    return sorted({f"U+{ord(c):04X}" for c in output if c not in "\n " and unicodedata.category(c)[0] in "CZ"})


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_a_result_as_json_escapes_what_a_terminal_would_act_on_and_round_trips(server_url: str, era: str) -> None:
    result = safedb("call", "--json", "--era", era, server_url, "echo", json.dumps({"text": HOSTILE}))
    assert result.returncode == 0, result.stderr
    assert _unsafe(result.stdout) == []
    assert "caf\u00e9 \u65e5\u672c \u2713" in result.stdout  # readable text stays readable
    answer = json.loads(result.stdout)
    assert answer["content"] == [{"type": "text", "text": HOSTILE}]
    assert answer["structuredContent"] == {"result": HOSTILE}


def test_a_servers_error_as_json_escapes_what_a_terminal_would_act_on_and_round_trips(server_url: str) -> None:
    result = safedb("call", "--json", server_url, "refuse_with_an_error", json.dumps({"message": HOSTILE}))
    assert result.returncode == 1
    assert _unsafe(result.stdout) == []
    assert json.loads(result.stdout) == {"error": {"code": -32602, "message": HOSTILE}}
