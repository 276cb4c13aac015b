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

from safedb.client.connection import connect
from safedb.client.form import TerminalAnswerer
from safedb.client.targets import http_target
from tests.client.test_client_redteam import safedb
from tests.client.test_terminal_form import lines, terminal
from tests.client.third_party.servers import mcp_v1_server, serving

pytestmark = pytest.mark.slow


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
