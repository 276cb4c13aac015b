"""Defects found by red-teaming the client, each pinned by the behaviour a person or a server sees.

Real parts throughout: MCP servers in processes of their own, a raw HTTP server for a hostile handshake,
the terminal form through prompt_toolkit's pipe input, `safedb call` as a process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import anyio
import pytest

from safedb.client.connection import connect
from safedb.client.form import TerminalAnswerer
from safedb.client.targets import http_target
from safedb.client.urls import review_url
from tests.client.servers import ROOT
from tests.client.test_commands import ERAS
from tests.client.test_terminal_form import lines, terminal
from tests.helpers import serving_process

REDTEAM_SERVER = [sys.executable, "-m", "tests.client.redteam_server", "--port", "0"]


def safedb(*args: str) -> subprocess.CompletedProcess[str]:
    """`safedb ARGS` as a process, running this checkout's code (its `src` first on the path)."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "safedb", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        input="",
        env={**os.environ, "PYTHONPATH": path},
    )


@pytest.fixture(scope="module")
def redteam_url() -> Iterator[str]:
    ready = re.compile(r"listening at (http://\S+/mcp)")
    with serving_process(REDTEAM_SERVER, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, ready=ready) as server:
        yield server.url


# -- URL mode: a host that browsers read differently from Python is never opened -------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example\\.good.example/approve",  # browsers: host evil.example (a backslash is "/")
        "https://evil.example\\good.example/approve",
        "https://ev%69l.example/approve",  # browsers: host evil.example (percent-decoded)
        "https://good.example%2eevil.example/approve",  # browsers: host good.example.evil.example
    ],
)
def test_a_host_that_browsers_read_differently_is_not_opened(url: str) -> None:
    review = review_url(url)
    assert not review.openable
    assert review.reason == "the host has characters that browsers drop or read differently"


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_backslash_url_is_not_opened_even_when_the_person_asks(redteam_url: str, era: str) -> None:
    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    with terminal(lines("o", "d")) as screen:
        async with connect(http_target(redteam_url), TerminalAnswerer(open_url), era) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_url_to", {"url": "https://evil.example\\.good.example/"})
    assert opened == []
    assert result.structured_content == {"page": {"action": "decline"}}
    assert "This URL will not be opened." in screen.getvalue()
