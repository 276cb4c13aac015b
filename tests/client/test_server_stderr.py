"""What a stdio server writes on its stderr reaches the terminal cleaned, every line, without stalling either side.

A real stdio server process (tests/client/redteam_server.py) writes escape sequences and bidi overrides on its
stderr while `safedb call` runs it; the client's own stderr is checked as a terminal would receive it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import anyio
import pytest
from mcp_types import ElicitResult

from safedb.client.connection import connect
from safedb.client.requests import ElicitationRequest
from safedb.client.targets import stdio_target
from tests.client.servers import ROOT
from tests.client.test_client_redteam import safedb

REDTEAM_STDIO = shlex.join([sys.executable, "-m", "tests.client.redteam_server", "--stdio"])

HOSTILE_LINES = [
    "title\x1b]0;PWNED\x07 set",  # window title
    "clipboard\x1b]52;c;cm0gLXJmIH4=\x07 written",  # OSC 52: the clipboard
    "screen\x1b[2J\x1b[H cleared\x1b[3A over the question",  # erase, cursor home, cursor up
    "order \u202ereversed\u202c back",  # a bidi override
    "carriage\r return",
]
CLEANED_LINES = ["title set", "clipboard written", "screen cleared over the question", "order reversed back",
                 "carriage return"]  # fmt: skip


def _server_lines(stderr: str) -> list[str]:
    """The numbered lines the server wrote ("3: ..."), in the order they reached the client's stderr."""
    return [line for line in stderr.splitlines() if line.split(":", 1)[0].isdigit()]


def test_a_stdio_servers_stderr_reaches_the_terminal_cleaned_line_by_line() -> None:
    arguments = json.dumps({"lines": HOSTILE_LINES, "unfinished": "7: last words\x1b[31m, no line break"})
    result = safedb("call", "--stdio", REDTEAM_STDIO, "write_stderr", arguments)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "written"
    assert _server_lines(result.stderr) == [*(f"1: {line}" for line in CLEANED_LINES), "7: last words, no line break"]
    assert not {"\x1b", "\x07", "\r", "\u202e", "\u202c"} & set(result.stderr)


def test_a_server_writing_much_on_stderr_is_not_stalled_and_loses_no_line() -> None:
    # 3000 lines of ~80 characters are several times what a pipe buffers: a client that stopped reading (or read
    # only at the end) would leave the server blocked in its write, and the call would never return.
    line = "x" * 70 + "\x1b[2K"
    started = time.monotonic()
    result = safedb("call", "--stdio", REDTEAM_STDIO, "write_stderr", json.dumps({"lines": [line], "repeat": 3000}))
    assert result.returncode == 0, result.stderr
    assert _server_lines(result.stderr) == [f"{number}: {'x' * 70}" for number in range(1, 3001)]
    assert time.monotonic() - started < 50


def test_a_process_keeping_the_servers_stderr_open_does_not_keep_the_client() -> None:
    # A process the server started in a session of its own outlives the server and holds the stderr pipe open: the
    # client must not wait for that pipe to end before it exits. (It did not wait before stderr was relayed either,
    # but that process then held the client's own stderr open, so `safedb call ... 2>&1 | cat` waited for it.)
    started = time.monotonic()
    result = safedb("call", "--stdio", REDTEAM_STDIO, "leave_stderr_open", "seconds=45")
    pid = int(result.stdout.strip())
    try:
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < 30
        os.kill(pid, 0)  # still running, so the pipe was still open when the client left
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_client_whose_own_stderr_is_gone_still_relays_and_finishes_the_call() -> None:
    # The client's stderr is a pipe no one reads any more (`2> >(head -1)` after its line): the server's lines can
    # only be dropped, but the relay must go on draining them, or the call fails (as it did: the relay's
    # BrokenPipeError ended the session, and `call` printed nothing).
    reading, writing = os.pipe()
    os.close(reading)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "safedb", "call", "--stdio", REDTEAM_STDIO, "write_stderr",
             json.dumps({"lines": ["a line"], "repeat": 3})],
            stdout=subprocess.PIPE, stderr=writing, stdin=subprocess.DEVNULL, text=True, timeout=60, check=False,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        )  # fmt: skip
    finally:
        os.close(writing)
    assert result.returncode == 0
    assert result.stdout.strip() == "written"


FAKE_HEADER = ["", "── Question from the server ──", "Server: Trusted Bank (https://bank.example)", "Message:"]


class _AnswerAfterAWhile:
    """Declines each question once the stderr relay has had time to show what the server writes while it is open."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.shown_while_asked: list[str] = []

    async def answer(self, request: ElicitationRequest) -> ElicitResult:
        self.capsys.readouterr()  # what came before the question
        await anyio.sleep(1.5)  # the server writes 0.3 s after it asks
        self.shown_while_asked.append(self.capsys.readouterr().err)
        return ElicitResult(action="decline")


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
async def test_what_a_server_writes_on_stderr_waits_until_its_question_is_answered(
    capsys: pytest.CaptureFixture[str], era: str
) -> None:
    """A server flooding its stderr as it asks could push the question's `Server:` line out of view and draw a header
    of its own in its place: its lines are held back while a question is open, then shown, all of them, in order."""
    lines = [f"filler {number}" for number in range(40)] + FAKE_HEADER
    answerer = _AnswerAfterAWhile(capsys)
    async with connect(stdio_target(REDTEAM_STDIO), answerer, era) as connection:
        result = await connection.call_tool("ask_after_writing_stderr", {"lines": lines})
        assert result.structured_content == {"confirm": {"action": "decline"}}
    assert len(answerer.shown_while_asked) == 1
    assert "filler" not in answerer.shown_while_asked[0]
    assert "Trusted Bank" not in answerer.shown_while_asked[0]
    shown_after = capsys.readouterr().err.splitlines()
    assert [line for line in shown_after if line and line in lines] == [line for line in lines if line]
