"""`safedb client` against a TypeScript SDK 2.x server (`@modelcontextprotocol/server` 2.4.0), a real process, in
both protocol eras: 2026-07-28, where its tools return `inputRequired(...)` (several questions at once, several
rounds, an opaque `requestState`), and the handshake era, where the SDK's shim turns the same returns into
`elicitation/create` requests. Over Streamable HTTP and stdio.

Each result says which era served it and, per round, whether the `requestState` came back exactly as sent.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from safedb.client import elicitation_handler
from safedb.client.connection import connect
from safedb.client.form import TerminalAnswerer
from safedb.client.targets import http_target
from tests.client.test_client_redteam import safedb
from tests.client.test_terminal_form import lines, terminal
from tests.client.third_party.servers import serving, ts_sdk2_server

pytestmark = pytest.mark.slow

ERAS = {"auto": "modern", "2026-07-28": "modern", "handshake": "legacy"}
BOOKING_RULES = [
    {"message": "Who is coming", "action": "accept", "content": {"name": "Ada", "guests": 2}},
    {"message": "Which day", "action": "decline"},
    {"message": "Book it", "action": "accept", "content": {"ok": True}},
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(ts_sdk2_server()) as served:
        yield served


def stdio_command() -> str:
    return shlex.join([*ts_sdk2_server(), "--stdio"])


def answers_file(tmp_path: Path, rules: list[dict[str, Any]], default: str = "decline") -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"default": default, "rules": rules}))
    return str(path)


def booked(who: dict[str, Any], when: dict[str, Any], confirm: dict[str, Any], era: str) -> dict[str, Any]:
    """The `book` tool's result: round 1 asked `who` and `when` together, round 2 `confirm`."""
    return {
        "era": era,
        "rounds": [
            {"state_ok": True, "answers": {"when": when, "who": who}},
            {"state_ok": True, "answers": {"confirm": confirm}},
        ],
    }


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("era", list(ERAS))
def test_two_rounds_two_questions_at_once_answered_by_rules(url: str, tmp_path: Path, transport: str, era: str) -> None:
    target = ["--stdio", stdio_command()] if transport == "stdio" else [url]
    rules = answers_file(tmp_path, BOOKING_RULES)
    done = safedb("call", "--json", "--era", era, "--answers", rules, *target, "book")
    assert done.returncode == 0, done.stderr
    expected = booked(
        {"action": "accept", "content": {"name": "Ada", "guests": 2}},
        {"action": "decline", "content": None},
        {"action": "accept", "content": {"ok": True}},
        ERAS[era],  # auto picks 2026-07-28, which the server offers
    )
    assert json.loads(done.stdout)["structuredContent"] == expected
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("era", list(ERAS))
def test_decline_all_and_cancel_by_default(url: str, tmp_path: Path, era: str) -> None:
    done = safedb("call", "--json", "--era", era, "--decline-all", url, "book")
    declined = {"action": "decline", "content": None}
    assert json.loads(done.stdout)["structuredContent"] == booked(declined, declined, declined, ERAS[era])
    cancel = answers_file(tmp_path, [], default="cancel")
    done = safedb("call", "--json", "--era", era, "--answers", cancel, url, "book")
    cancelled = {"action": "cancel", "content": None}
    assert json.loads(done.stdout)["structuredContent"] == booked(cancelled, cancelled, cancelled, ERAS[era])


@pytest.mark.parametrize("era", list(ERAS))
def test_url_mode_consent_and_decline(url: str, tmp_path: Path, era: str) -> None:
    consent = answers_file(tmp_path, [{"mode": "url", "action": "accept"}])
    done = safedb("call", "--era", era, "--answers", consent, url, "sign_in", "url=https://example.org/login")
    assert (done.returncode, json.loads(done.stdout)) == (0, {"era": ERAS[era], "action": "accept"})
    done = safedb("call", "--era", era, "--decline-all", url, "sign_in", "url=https://example.org/login")
    assert json.loads(done.stdout) == {"era": ERAS[era], "action": "decline"}


def test_errors_are_reported_in_one_line(url: str) -> None:
    done = safedb("call", "--decline-all", url, "no_such_tool")
    assert (done.returncode, done.stdout.strip()) == (1, "Error from the server: Tool no_such_tool not found")
    done = safedb("call", "--decline-all", url, "sign_in")  # the required `url` is missing: the SDK's zod says so
    assert done.returncode == 1
    assert done.stdout.startswith("Error from the tool:\nInput validation error: Invalid arguments for tool sign_in")
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.anyio
async def test_two_questions_of_one_round_are_asked_one_after_the_other_in_the_terminal(url: str) -> None:
    keys = "a\r" + lines("Ada", "3") + "s\r"  # who: accept, name, guests, send
    keys += "d\r"  # when: decline
    keys += "a\r" + lines("yes") + "s\r"  # confirm: accept, ok, send
    with terminal(keys) as screen:
        async with connect(http_target(url), TerminalAnswerer(), "2026-07-28") as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("book", {})
    shown = screen.getvalue()
    assert "Question 1 of 2" in shown
    assert "Question 2 of 2" in shown
    assert result.structured_content == booked(
        {"action": "accept", "content": {"name": "Ada", "guests": 3}},
        {"action": "decline", "content": None},
        {"action": "accept", "content": {"ok": True}},
        "modern",
    )


# -- the answer is checked as the server's AJV checks it ----------------------------------------------------------


async def ask(url: str, mode: str, spec: dict[str, Any], value: Any) -> Any:
    """Ask the server for one required field `f`; the program answers `value`; the server checks it with AJV."""

    async def answer(question: Any) -> dict[str, Any]:
        return {"f": value}

    schema = {"type": "object", "properties": {"f": spec}, "required": ["f"]}
    async with Client(url, mode=mode, elicitation_callback=elicitation_handler(answer)) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("ask", {"schema": schema})
    return result.structured_content


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("spec", "value", "sent"),
    [
        ({"type": "number", "multipleOf": 0.01}, 0.25, True),
        ({"type": "integer", "multipleOf": 12}, 36, True),
        ({"type": "string", "format": "date"}, "2024-02-29", True),
        ({"type": "string", "format": "date"}, "2023-02-29", False),
        ({"type": "string", "format": "email"}, "ada@localhost", False),
        ({"type": "string", "minLength": 2, "maxLength": 2}, "😀😀", True),
    ],
)
async def test_answers_are_checked_as_the_servers_ajv_checks_them(
    url: str, mode: str, spec: dict[str, Any], value: Any, sent: bool
) -> None:
    era = "modern" if mode == "auto" else "legacy"
    if sent:
        expected = {"era": era, "action": "accept", "content": {"f": value}, "valid": True}
    else:  # never sent: the client cancels rather than send what the server would refuse
        expected = {"era": era, "action": "cancel", "content": None, "valid": None}
    assert await ask(url, mode, spec, value) == expected
