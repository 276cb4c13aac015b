"""`safedb client` in a real terminal (tmux) against a running `safedb serve`: approve, then decline.

The keystrokes go through tmux into the client's pty exactly as a person's would; the database is
checked through a connection of its own afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ServerProcess, rows, safedb_serve, scratch_table

pytestmark = pytest.mark.slow


class Tmux:
    """One private tmux server (its own socket) running one window."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"safedb-test-{uuid.uuid4().hex[:8]}"
        self._run("new-session", "-d", "-s", "main", "-x", "200", "-y", "50", *command)

    def _run(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10, check=True
        )
        return result.stdout

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-J", "-S", "-500", "-t", "main")

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "main", "-l", text)
        self._run("send-keys", "-t", "main", "Enter")

    def wait_for(self, text: str, *, after: int = 0, timeout: float = 30) -> int:
        """Wait until `text` shows up at or after position `after`; return where it ends."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            found = screen.find(text, after)
            if found >= 0:
                return found + len(text)
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout}s; the screen shows:\n{screen}")
            time.sleep(0.05)  # polling the screen, bounded by the deadline

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10, check=False)


@pytest.fixture(scope="module")
def served(shared_db: Path) -> Iterator[ServerProcess]:
    with safedb_serve(shared_db) as server:
        yield server


@pytest.fixture
def client_terminal(served: ServerProcess) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail("tmux is required for the terminal tests (SAFEDB_REQUIRE_ALL=1)")
        pytest.skip("tmux is not installed")
    path = f"PYTHONPATH={Path(__file__).resolve().parents[2] / 'src'}"  # this checkout's code, not the installed one
    terminal = Tmux(["env", "TERM=xterm-256color", path, sys.executable, "-m", "safedb", "client", served.url])
    try:
        terminal.wait_for("SafeDB>")
        yield terminal
    finally:
        terminal.close()


def test_approving_a_change_in_the_terminal_form(client_terminal: Tmux, shared_db: Path) -> None:
    table = scratch_table(shared_db)
    terminal = client_terminal
    terminal.type(f'call execute_query query="DELETE FROM {table} WHERE id = 2"')
    at = terminal.wait_for("Answer: [a]ccept and fill in, [d]ecline, [c]ancel:")
    screen = terminal.screen()
    assert "Server: SafeDB at http://127.0.0.1:" in screen
    assert f"Statement: DELETE FROM {table} WHERE id = 2" in screen
    terminal.type("a")
    at = terminal.wait_for("[1/3] Run this statement?", after=at)
    terminal.type("maybe")
    at = terminal.wait_for("answer yes or no", after=at)
    terminal.type("yes")
    at = terminal.wait_for("[2/3] Justification", after=at)
    terminal.type("removing a test row")
    at = terminal.wait_for("[3/3] Environment", after=at)
    terminal.type("Dev")
    at = terminal.wait_for("[s]end these answers", after=at)
    assert "Environment: Development" in terminal.screen()
    terminal.type("s")
    terminal.wait_for("1 row affected", after=at)
    assert rows(shared_db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (3,)]


def test_declining_a_change_in_the_terminal_form(client_terminal: Tmux, shared_db: Path) -> None:
    table = scratch_table(shared_db)
    terminal = client_terminal
    terminal.type(f'call execute_query query="DROP TABLE {table}"')
    at = terminal.wait_for("Answer: [a]ccept and fill in, [d]ecline, [c]ancel:")
    terminal.type("d")
    terminal.wait_for("The request was declined", after=at)
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]
    terminal.type("quit")
