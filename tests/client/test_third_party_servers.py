"""`safedb client` against elicitation servers it did not grow up with: the TypeScript SDK 1.x and the Python
SDK 1.x, each a real process of its own stack, over Streamable HTTP and stdio.

The TypeScript SDK checks an accepted answer against the requested schema itself (AJV, with formats), so what it
refuses is what the client must never send.
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
from tests.client.third_party.servers import mcp_v1_server, serving, ts_sdk_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ts_url() -> Iterator[str]:
    with serving(ts_sdk_server()) as url:
        yield url


@pytest.fixture(scope="module")
def mcp_v1_url() -> Iterator[str]:
    with serving(mcp_v1_server()) as url:
        yield url


def answers_file(tmp_path: Path, rules: list[dict[str, Any]]) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"rules": rules}))
    return str(path)


# -- Python SDK 1.x: optional fields come as anyOf [X, null] with default null ---------------------------------


@pytest.mark.anyio
async def test_optional_fields_of_a_python_sdk_1_server_are_asked_in_the_terminal(mcp_v1_url: str) -> None:
    # accept; name; nickname left out; guests 3; budget left out; seating as pre-filled; newsletter no; send
    keys = "a\r" + lines("Ada", "", "3", "", None, "no") + "s\r"
    with terminal(keys) as screen:
        async with connect(http_target(mcp_v1_url), TerminalAnswerer()) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("book", {})
    shown = screen.getvalue()
    assert "The form asks for: Name, Nickname (optional), Guests (optional)" in shown
    assert "whole number, 1 to 8, optional" in shown
    sent = {"name": "Ada", "guests": 3, "seating": "inside", "newsletter": False}
    assert json.loads(result.content[0].text) == {"action": "accept", "content": sent}  # type: ignore[union-attr]


def test_optional_fields_of_a_python_sdk_1_server_are_answered_by_rules_over_stdio(tmp_path: Path) -> None:
    command = shlex.join([*mcp_v1_server(), "--stdio"])
    fits = answers_file(tmp_path, [{"action": "accept", "content": {"name": "Ada", "budget": 12.5}}])
    done = safedb("call", "--answers", fits, "--stdio", command, "book")
    assert done.returncode == 0, done.stderr
    sent = {"name": "Ada", "budget": 12.5, "seating": "inside"}
    assert json.loads(done.stdout) == {"action": "accept", "content": sent}
    too_many = answers_file(tmp_path, [{"action": "accept", "content": {"name": "Ada", "guests": 9}}])
    done = safedb("call", "--answers", too_many, "--stdio", command, "book")
    assert json.loads(done.stdout) == {"action": "cancel"}
    assert "guests: Input should be less than or equal to 8" in done.stderr


# -- TypeScript SDK 1.x: formats checked by AJV on the server -----------------------------------------------------


async def ask(url: str, spec: dict[str, Any], value: Any) -> Any:
    """Ask the TypeScript server for one required field `f`; the program answers `value`."""

    async def answer(question: Any) -> dict[str, Any]:
        return {"f": value}

    schema = {"type": "object", "properties": {"f": spec}, "required": ["f"]}
    async with Client(url, mode="legacy", elicitation_callback=elicitation_handler(answer)) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("ask", {"schema": schema})
    return result.structured_content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("spec", "value", "sent"),
    [
        ({"type": "string", "format": "email"}, "ada.lovelace+mcp@example.org", True),
        ({"type": "string", "format": "email"}, "ü@example.org", False),  # that is format idn-email
        ({"type": "string", "format": "email"}, "ada..lovelace@example.org", False),
        ({"type": "string", "format": "email"}, ".ada@example.org", False),
        ({"type": "string", "format": "email"}, "ada\x07@example.org", False),
        ({"type": "string", "format": "email"}, "ada@exa..mple.org", False),
        ({"type": "string", "format": "email"}, "ada@localhost", False),
        ({"type": "string", "format": "uri"}, "https://example.org/%C3%A4?q=1#top", True),
        ({"type": "string", "format": "uri"}, "urn:isbn:0451450523", True),
        ({"type": "string", "format": "uri"}, "https://example.org/ä", False),  # an IRI, not a URI
        ({"type": "string", "format": "uri"}, "https://example.org/100%", False),
        ({"type": "string", "format": "uri"}, "https://example.org/{id}", False),
        ({"type": "string", "format": "uri"}, "https://example.org/a[1]", False),
        ({"type": "string", "format": "uri"}, "https://example.org/#a#b", False),
        ({"type": "string", "format": "uri"}, "http://[::1]:8080/x", True),
    ],
)
async def test_formats_are_checked_as_the_typescript_sdk_checks_them(
    ts_url: str, spec: dict[str, Any], value: str, sent: bool
) -> None:
    # An answer the server's check refuses would fail the whole tool call; the client cancels instead.
    expected = {"action": "accept", "content": {"f": value}} if sent else {"action": "cancel", "content": None}
    assert await ask(ts_url, spec, value) == expected


# -- TypeScript SDK 1.x: what held up, kept so -------------------------------------------------------------------


def test_a_typescript_sdk_server_over_stdio_notifications_requests_and_url_mode(tmp_path: Path) -> None:
    command = shlex.join([*ts_sdk_server(), "--stdio"])
    # Progress and log notifications, sampling and roots requests the client did not declare: the call goes on.
    done = safedb("call", "--json", "--decline-all", "--stdio", command, "busy")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [block["type"] for block in result["content"]] == ["text", "image", "resource_link", "resource"]
    assert set(result["structuredContent"]["outcomes"].values()) == {"error -32600"}
    # URLElicitationRequiredError (-32042): declined, the error is shown; consented, the call is retried once the
    # server reports the page complete.
    done = safedb("call", "--decline-all", "--stdio", command, "needs_url")
    assert done.returncode == 1
    assert done.stdout.strip() == "Error from the server: MCP error -32042: URL elicitation required"
    consent = answers_file(tmp_path, [{"mode": "url", "action": "accept"}])
    done = safedb("call", "--answers", consent, "--stdio", command, "needs_url")
    assert (done.returncode, done.stdout.strip()) == (0, "page was completed; the call goes through")
