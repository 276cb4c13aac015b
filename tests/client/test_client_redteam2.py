"""Defects found by red-teaming the client, second round, each pinned by what a person or a script sees.

Real parts: the feature server over HTTP in both eras, a hand-written stdio server for a malformed tool list,
`safedb call` and `safedb client` as processes.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from safedb.client.console_log import OneLineFormatter, shown_on_console
from safedb.client.model import schema_to_model
from safedb.client.sanitize import clean_text
from safedb.client.schema import UnsupportedSchema, parse_requested_schema
from safedb.terminal_json import visible_json
from tests.client.test_client_redteam import safedb
from tests.client.test_commands import ERAS, answers_file

# -- a server's pattern that backtracks for hours on a short value ------------------------------------------------

SLOW_VALUE = "a" * 60 + "!"
BACKTRACKING = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(a|aa)+$", "default": SLOW_VALUE}},
}


@pytest.mark.timeout(60)
def test_a_default_a_pattern_would_backtrack_on_for_hours_is_dropped() -> None:
    assert parse_requested_schema(BACKTRACKING).fields[0].default is None


@pytest.mark.timeout(60)
def test_an_answer_a_pattern_would_backtrack_on_for_hours_is_refused() -> None:
    model = schema_to_model(BACKTRACKING)
    with pytest.raises(ValueError, match="cannot be checked against the pattern"):
        model.model_validate({"code": SLOW_VALUE})
    assert model.model_validate({"code": "aaaa"}).model_dump(by_alias=True) == {"code": "aaaa"}


@pytest.mark.parametrize("era", ERAS)
def test_a_rule_answer_a_pattern_would_backtrack_on_for_hours_is_never_sent(
    tmp_path: Path, server_url: str, era: str
) -> None:
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": {"code": SLOW_VALUE}}]})
    arguments = f"requested_schema:={json.dumps(BACKTRACKING)}"
    result = safedb("call", "--json", "--era", era, "--answers", rules, server_url, "ask_for", arguments)
    assert json.loads(result.stdout)["structuredContent"] == {"form": {"action": "cancel"}}
    assert "cannot be checked against the pattern" in result.stderr


# -- characters that draw nothing, outside the format characters ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("DR\u034fOP TABLE", "DROP TABLE"),  # combining grapheme joiner
        ("DR\ufe0fOP TABLE", "DROP TABLE"),  # a variation selector after a Latin letter
        ("DR\U000e0100OP TABLE", "DROP TABLE"),
        ("DR\u200dOP\u200c TABLE", "DROP TABLE"),  # the joiners after ASCII
        ("\u3164DROP\uffa0TABLE\u115f\u1160", "DROPTABLE"),  # Hangul fillers
        ("DR\u17b4OP\u17b5", "DROP"),  # inherent Khmer vowels
        ("a\u180bb", "ab"),  # a Mongolian variation selector after a Latin letter
        ("x\U000e0200y", "xy"),  # unassigned, reserved as default-ignorable
    ],
)
def test_default_ignorable_characters_are_removed(text: str, shown: str) -> None:
    assert clean_text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "\u2764\ufe0f",  # a red heart, drawn as an emoji
        "\u8fbb\U000e0100",  # an ideographic variation sequence
        "\u1820\u180b",  # a Mongolian letter's variant form
        "\u2265\ufe00",  # a mathematical symbol's variant
    ],
)
def test_variation_selectors_that_choose_a_form_are_kept(text: str) -> None:
    assert clean_text(text) == text


def test_json_output_escapes_default_ignorable_characters() -> None:
    text = "DR\u034fOP \u2764\ufe0f \u3164 caf\u00e9"
    shown = visible_json({"message": text})
    assert shown == '{"message": "DR\\u034fOP \\u2764\\ufe0f \\u3164 café"}'.replace("\\u2764", "\u2764")
    assert json.loads(shown) == {"message": text}


DECLINE_DROP_TABLE = {"default": "accept", "rules": [{"message": "DROP TABLE", "action": "decline"}]}
YES_NO = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@pytest.mark.parametrize(
    "message",
    [
        "DR\u034fOP TABLE users",
        "DR\ufe0fOP TABLE users",
        "DR\u200dOP TABLE users",
        "DROP\u00a0TABLE users",  # a no-break space reads as a space
        "DROP\u3000TABLE users",
        "\uff24\uff32\uff2f\uff30 TABLE users",  # full-width letters read as DROP
    ],
)
def test_a_decline_rule_matches_the_message_as_a_person_reads_it(tmp_path: Path, server_url: str, message: str) -> None:
    rules = answers_file(tmp_path, DECLINE_DROP_TABLE)
    arguments = [f"requested_schema:={json.dumps(YES_NO)}", f"message={message}"]
    result = safedb("call", "--json", "--answers", rules, server_url, "ask_for", *arguments)
    assert json.loads(result.stdout)["structuredContent"] == {"form": {"action": "decline"}}


# -- bounds beyond the numbers a float can hold ---------------------------------------------------------------------

BEYOND_FLOATS = ["1e400", "-1e400", "1" + "0" * 400]


@pytest.mark.parametrize("keyword", ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"])
@pytest.mark.parametrize("number", BEYOND_FLOATS, ids=["1e400", "-1e400", "10^400"])
def test_a_bound_beyond_the_floats_makes_the_form_unsupported(keyword: str, number: str) -> None:
    field = json.loads(f'{{"type": "number", "{keyword}": {number}, "default": 5}}')
    with pytest.raises(UnsupportedSchema, match=f"{keyword} is beyond the numbers this client can check"):
        parse_requested_schema({"type": "object", "properties": {"x": field}})


@pytest.mark.parametrize("era", ERAS)
def test_a_form_with_a_bound_beyond_the_floats_is_answered_not_crashed_on(
    tmp_path: Path, server_url: str, era: str
) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer", "multipleOf": 10**400}}}
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": {"x": 5}}]})
    result = safedb(
        "call",
        "--json",
        "--era",
        era,
        "--answers",
        rules,
        server_url,
        "ask_for",
        f"requested_schema:={json.dumps(schema)}",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["structuredContent"] == {"form": {"action": "cancel"}}
    assert "Traceback" not in result.stderr


# -- a server's own errors of code -32000 -------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_a_servers_error_of_code_minus_32000_is_its_answer_not_a_lost_connection(server_url: str, era: str) -> None:
    result = safedb("call", "--json", "--era", era, server_url, "refuse_with_an_error", "code:=-32000", "message=busy")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"error": {"code": -32000, "message": "busy"}}
    assert "Cannot talk to" not in result.stderr

    session = safedb(
        "client",
        "--era",
        era,
        server_url,
        "-x",
        "call refuse_with_an_error code:=-32000 message=busy",
        "-x",
        "echo text=still-here",
    )
    assert "busy" in session.stdout
    assert "still-here" in session.stdout, session.stderr
    assert "Cannot talk to" not in session.stderr


# -- a tool list with one tool that is not in MCP's form ------------------------------------------------------------

RAW_SERVER = shlex.join([sys.executable, "-m", "tests.client.raw_stdio_server"])


def _called(output: str) -> dict[str, Any]:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


def test_a_malformed_tool_is_left_out_and_the_others_are_used() -> None:
    result = safedb("client", "--stdio", RAW_SERVER, "-x", "tools", "-x", "echo word=hi")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("{")[0]
    assert "echo" in listed
    assert "also_echo" in listed
    assert "malformed" not in listed
    assert _called(result.stdout) == {"name": "echo", "arguments": {"word": "hi"}}
    assert result.stderr.count("Leaving out tool 'malformed'") == 1
    assert "Traceback" not in result.stderr


def test_a_malformed_tool_can_still_be_called_by_name() -> None:
    result = safedb("call", "--stdio", RAW_SERVER, "malformed", "a:=1")
    assert result.returncode == 0, result.stderr
    assert _called(result.stdout) == {"name": "malformed", "arguments": {"a": 1}}
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("handshake", "said"),
    [
        ("no-capabilities", "it answered in a form MCP does not allow (capabilities: Field required)"),
        ("version=2024-10-07", "Unsupported protocol version from the server: 2024-10-07"),
        # The server's own text reaches the terminal without its escape sequences and backspaces.
        ("version=2025\x1b]0;PWNED\x07\x1b[31m\x08\x08", "Unsupported protocol version from the server: 2025"),
    ],
)
def test_a_handshake_the_client_cannot_use_is_one_clear_line(handshake: str, said: str) -> None:
    """It ended in a traceback (pydantic's ValidationError, the SDK's RuntimeError) that printed the server's text
    as it was."""
    result = safedb("call", "--stdio", f"{RAW_SERVER} {shlex.quote(handshake)}", "echo")
    assert result.returncode == 1
    assert f"Cannot talk to {sys.executable} -m tests.client.raw_stdio_server" in result.stderr, result.stderr
    assert said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr
    assert "\x08" not in result.stderr


def test_bytes_that_are_not_utf8_on_a_servers_stdout_are_reported_and_the_session_goes_on() -> None:
    """The first such byte ended the reading of the server's stdout for good: the handshake waited for its timeout,
    then a traceback (a call under way waited for a day)."""
    result = safedb("call", "--stdio", f"{RAW_SERVER} not-utf8", "echo", "word=hi")
    assert result.returncode == 0, result.stderr
    assert _called(result.stdout) == {"name": "echo", "arguments": {"word": "hi"}}
    assert "not an MCP message (ignored)" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_reply_nested_deeper_than_the_sdk_reads_ends_the_call_in_one_line() -> None:
    """The SDK could not read it, and dropped it: the call it answered waited for its read timeout, a day."""
    result = safedb("call", "--stdio", RAW_SERVER, "deep_reply")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "sent a reply SafeDB cannot read (Invalid JSON: recursion limit exceeded" in result.stdout, result.stdout
    assert "Traceback" not in result.stderr


def test_a_question_nested_deeper_than_the_sdk_reads_is_answered_with_an_error() -> None:
    """Dropped, the question went unanswered: the server waited for its answer and the client for the server."""
    result = safedb("call", "--decline-all", "--stdio", RAW_SERVER, "deep_question")
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["id"] == "q1"
    assert answer["error"]["code"] == -32602
    assert "sent a message SafeDB cannot read" in result.stderr
    assert "Traceback" not in result.stderr


# -- an SDK error from inside a task group -------------------------------------------------------------------------


def test_an_error_from_a_task_group_is_shown_as_the_error_inside_it() -> None:
    try:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionRefusedError("the server went away")])
    except ExceptionGroup:
        record = logging.LogRecord("mcp.client.streamable_http", logging.ERROR, "", 0, "Error in post_writer", (), None)
        record.exc_info = sys.exc_info()
    line = OneLineFormatter().format(record)
    assert line == "Error: Error in post_writer (ConnectionRefusedError: the server went away)"


def _sdk_record(name: str, message: str, error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        record = logging.LogRecord(name, logging.ERROR, "", 0, message, (), None)
        record.exc_info = sys.exc_info()
    return record


@pytest.mark.parametrize(
    ("error", "shown"),
    [(anyio.BrokenResourceError(), False), (anyio.ClosedResourceError(), False), (ValueError("bad JSON"), True)],
)
def test_a_message_forwarded_after_its_call_ended_is_not_an_error_on_the_console(
    error: BaseException, shown: bool
) -> None:
    """A server's notification on a request's stream after its result (a URL elicitation's completion) printed
    `Error: Error parsing SSE message (BrokenResourceError)` after every such call; a real parse failure still shows."""
    record = _sdk_record("mcp.client.streamable_http", "Error parsing SSE message", error)
    assert shown_on_console(record) is shown
