"""The terminal form (prompt_toolkit) against the feature server over HTTP, in both protocol eras.

Keystrokes go through prompt_toolkit's pipe input and the screen is captured as plain text, so this
runs the real form code and a real server; the tmux tests cover a real terminal end to end.
"""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.plain_text import PlainTextOutput

from safedb.client.connection import Connection, connect
from safedb.client.form import TerminalAnswerer
from safedb.client.targets import StdioTarget, http_target
from tests.client.servers import FEATURE_SERVER, ROOT

pytestmark = pytest.mark.anyio

ESC = "\x1b"


@pytest.fixture(params=["handshake", "2026-07-28"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def terminal(keys: str) -> Iterator[io.StringIO]:
    screen = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        with create_app_session(input=pipe, output=PlainTextOutput(screen)):
            yield screen


@asynccontextmanager
async def connected(url: str, era: str, answerer: TerminalAnswerer) -> AsyncIterator[Connection]:
    async with connect(http_target(url), answerer, era) as connection:
        yield connection


KEEP = None
"""Press Enter on the pre-filled text as it is."""


def lines(*typed: str | None) -> str:
    """Each line replaces whatever was pre-filled (Ctrl-U clears the line) and is entered; KEEP keeps it."""
    return "".join("\r" if line is KEEP else f"\x15{line}\r" for line in typed)


async def test_every_schema_feature_through_the_terminal_form(server_url: str, era: str) -> None:
    keys = lines(
        "a",  # accept and fill in
        "A", "Ada Lovelace",  # name: too short, asked again
        "ada@example.com",
        "not a uri", "https://ada.example",  # homepage
        "1815-12-10",  # birthday
        "",  # meeting: optional, left out
        KEEP,  # age: keep the pre-filled default (30)
        "11", "9.5",  # score: above maximum, asked again
        KEEP,  # subscribe: keep default (yes)
        "green",  # color
        "3",  # size: Large
        "Pro plan",  # plan (legacy enumNames)
        "cheese,olives",  # toppings
        KEEP,  # days: keep default (Monday)
        "Augusta",  # first-name
        "s",  # send
    )  # fmt: skip
    with terminal(keys) as screen:
        async with connected(server_url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_everything", {})
    assert result.structured_content == {
        "form": {
            "action": "accept",
            "content": {
                "name": "Ada Lovelace",
                "email": "ada@example.com",
                "homepage": "https://ada.example",
                "birthday": "1815-12-10",
                "age": 30,
                "score": 9.5,
                "subscribe": True,
                "color": "green",
                "size": "l",
                "plan": "pro",
                "toppings": ["cheese", "olives"],
                "days": ["mon"],
                "first-name": "Augusta",
            },
        }
    }
    shown = screen.getvalue()
    assert "Server: Feature Server at " + server_url in shown
    assert "Please fill in the feature form. Thanks!" in shown  # escape sequences removed
    assert "evil title" not in shown
    assert "at least 2 characters" in shown
    assert "less than or equal to 10" in shown
    assert "1) Small" in shown
    assert "meeting: (left out)" in shown


async def test_the_form_is_shown_where_the_terminal_in_force_when_it_asks_shows_it(server_url: str, era: str) -> None:
    """`safedb call --json URL ... | jq`: the CLI makes its answerer, then moves forms to stderr. The form must
    follow, or its prompts go into the JSON on stdout where nobody sees them."""
    answerer = TerminalAnswerer()
    with terminal(lines("d")) as screen:
        async with connected(server_url, era, answerer) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_everything", {})
    assert result.structured_content == {"form": {"action": "decline"}}
    assert "[a]ccept and fill in, [d]ecline, [c]ancel" in screen.getvalue()


@pytest.mark.parametrize(("keys", "action"), [(lines("d"), "decline"), (lines("c"), "cancel")])
async def test_decline_and_cancel_are_explicit_choices(server_url: str, era: str, keys: str, action: str) -> None:
    with terminal(keys) as screen:
        async with connected(server_url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_everything", {})
    assert result.structured_content == {"form": {"action": action}}
    assert "[a]ccept and fill in, [d]ecline, [c]ancel" in screen.getvalue()


@pytest.mark.parametrize("key", [ESC, "\x03"], ids=["esc", "ctrl-c"])
async def test_esc_or_ctrl_c_in_the_middle_of_a_form_cancels(server_url: str, era: str, key: str) -> None:
    screen = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=PlainTextOutput(screen)):
        pipe.send_text(lines("a", "Ada"))

        async def press_when_asked_for_the_email() -> None:
            while "[2/14] Email" not in screen.getvalue():
                await anyio.sleep(0.01)
            pipe.send_text(key)

        async with connected(server_url, era, TerminalAnswerer()) as connection, anyio.create_task_group() as group:
            with anyio.fail_after(30):
                group.start_soon(press_when_asked_for_the_email)
                result = await connection.call_tool("ask_everything", {})
    assert result.structured_content == {"form": {"action": "cancel"}}
    assert "Cancelled" in screen.getvalue()


async def test_alt_key_shortcuts_edit_the_line_and_do_not_cancel(server_url: str, era: str) -> None:
    alt_backspace, alt_b, alt_f = ESC + "\x7f", ESC + "b", ESC + "f"
    typed = f"Ada Byron{alt_backspace}Lovelace{alt_b}King {alt_f}!"  # delete a word, back a word, forward a word
    with terminal(lines("a", typed, "s")) as screen:
        async with connected(server_url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_secret", {})
    assert result.structured_content == {"secret": {"action": "accept", "content": {"api_key": "Ada King Lovelace!"}}}
    assert "Cancelled" not in screen.getvalue()


async def test_questions_arriving_together_are_asked_one_at_a_time(server_url: str, era: str) -> None:
    keys = lines("a", "yes", "s") + lines("a", "no", "s") + lines("d")
    with terminal(keys) as screen:
        async with connected(server_url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_three", {})
    # Asked in the order they came: the first keystrokes answer question 1.
    assert result.structured_content == {
        "q1": {"action": "accept", "content": {"ok": True}},
        "q2": {"action": "accept", "content": {"ok": False}},
        "q3": {"action": "decline"},
    }
    headers = [line for line in screen.getvalue().splitlines() if line.startswith("── Question")]
    assert len(headers) == 3
    # The first question waits a moment for its siblings; it shows the total known when it is shown.
    assert re.fullmatch(r"── Question( 1 of [23])? from the server ──", headers[0])
    assert headers[1:] == ["── Question 2 of 3 from the server ──", "── Question 3 of 3 from the server ──"]


async def test_a_question_open_when_a_stdio_server_dies_is_withdrawn_and_frees_the_keyboard() -> None:
    server = StdioTarget(FEATURE_SERVER[0], (*FEATURE_SERVER[1:], "--stdio"), cwd=str(ROOT))
    screen = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=PlainTextOutput(screen)):
        async with connect(server, TerminalAnswerer(), "handshake") as connection:
            with anyio.fail_after(30), pytest.raises(MCPError, match="Connection closed"):
                await connection.call_tool("ask_then_exit", {})
            assert "Answer: [a]ccept and fill in" in screen.getvalue()
            assert "The question was withdrawn" in screen.getvalue()
            # What asks next gets the keys: the form's prompt is gone, not competing with it.
            pipe.send_text("help\r")
            with anyio.fail_after(10):
                assert await PromptSession[str]().prompt_async("next> ") == "help"


async def test_secret_looking_fields_get_a_warning(server_url: str, era: str) -> None:
    with terminal(lines("d")) as screen:
        async with connected(server_url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_secret", {})
    assert result.structured_content == {"secret": {"action": "decline"}}
    assert "'api_key' looks like a secret" in screen.getvalue()


async def test_url_mode_opens_only_on_consent_and_finishes_in_each_era(server_url: str, era: str) -> None:
    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    keys = lines("o", "d") if era == "2026-07-28" else lines("o")
    with terminal(keys) as screen:
        async with connected(server_url, era, TerminalAnswerer(open_url)) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_url", {})
            completions = list(connection.completions)
    assert result.structured_content == {"page": {"action": "accept"}}
    assert opened == ["https://example.com/approve?request=42"]
    shown = screen.getvalue()
    assert "URL:  https://example.com/approve?request=42" in shown
    assert "Host: example.com" in shown
    if era == "handshake":
        assert completions == ["page-42"]  # the server's completion notification arrived
    else:
        assert "When you have finished on the page" in shown


async def test_url_mode_declined_opens_nothing(server_url: str, era: str) -> None:
    opened: list[str] = []
    with terminal(lines("d")):
        async with connected(server_url, era, TerminalAnswerer(lambda url: opened.append(url) is None)) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_url", {})
    assert result.structured_content == {"page": {"action": "decline"}}
    assert opened == []


async def test_url_elicitation_required_is_answered_then_the_call_retried(server_url: str) -> None:
    opened: list[str] = []
    with terminal(lines("o")) as screen:
        async with connected(
            server_url, "handshake", TerminalAnswerer(lambda url: opened.append(url) is None)
        ) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("needs_authorization", {})
            completions = list(connection.completions)
    assert not result.is_error
    assert result.structured_content == {"result": "authorized"}
    assert opened == ["https://example.com/auth"]
    assert completions == ["auth-7"]
    assert "Host: example.com" in screen.getvalue()


async def ask_for(url: str, era: str, keys: str, schema: dict[str, Any]) -> tuple[Any, str]:
    """Answer one form of the given schema with these keys; the content the server received, and the screen."""
    with terminal(keys) as screen:
        async with connected(url, era, TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_for", {"requested_schema": schema})
    return result.structured_content, screen.getvalue()


async def test_enums_patterns_bounds_steps_and_consts_are_checked_before_sending(server_url: str, era: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            "price": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
            "agree": {"type": "boolean", "const": True},
        },
        "required": ["level", "zip", "price", "agree"],
    }
    keys = lines("a", "7", "2", "abc", "12345", "0", "0.3", "2.5", "no", "yes", "s")
    sent, shown = await ask_for(server_url, era, keys, schema)
    assert sent == {"form": {"action": "accept", "content": {"level": 2, "zip": "12345", "price": 2.5, "agree": True}}}
    for reason in ("must be one of 1, 2, 3", "must match the pattern ^[0-9]{5}$", "greater than 0",
                   "must be a multiple of 0.5", "must be true"):  # fmt: skip
        assert reason in shown
    assert "(whole number, one of 1, 2, 3, required)" in shown


async def test_multi_selects_take_no_choice_and_choices_with_commas_and_numbers_mean_values(
    server_url: str, era: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}},
            "authors": {
                "type": "array",
                "items": {"type": "string", "enum": ["Smith, John", "Doe, Jane", "Roe"]},
                "default": ["Smith, John", "Roe"],
            },
            "size": {"type": "string", "enum": ["5", "10", "20"]},
        },
        "required": ["tags", "authors", "size"],
    }
    keys = lines(
        "a",
        "", "-",  # tags: Enter alone is refused for a required field; "-" chooses none
        KEEP,  # authors: the pre-filled defaults, whose values contain commas
        "1", "10",  # size: "1" is not an option (nor the start of "10")
        "e", KEEP, KEEP, KEEP,  # edit: every pre-filled answer comes back as it was
        "s",
    )  # fmt: skip
    sent, shown = await ask_for(server_url, era, keys, schema)
    assert sent == {
        "form": {"action": "accept", "content": {"tags": [], "authors": ["Smith, John", "Roe"], "size": "10"}}
    }
    assert "this field is required" in shown
    assert "'1' is not one of the options (5, 10, 20)" in shown
    assert "- for none" in shown
    assert "tags: (none)" in shown
    assert 'authors: "Smith, John", Roe' in shown  # the summary shows which commas are inside a choice
