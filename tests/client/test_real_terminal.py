"""`safedb client` in a real terminal (tmux) against a running `safedb serve`: approve, then decline.

The keystrokes go through tmux into the client's pty exactly as a person's would; the database is
checked through a connection of its own afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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

    def press(self, key: str) -> None:
        """Press one key, in tmux's names (C-c)."""
        self._run("send-keys", "-t", "main", key)

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

    def in_view(self) -> str:
        """What the terminal shows now, without the lines scrolled out of view."""
        return self._run("capture-pane", "-p", "-J", "-t", "main")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10, check=False)


@pytest.fixture(scope="module")
def served(shared_db: Path) -> Iterator[ServerProcess]:
    with safedb_serve(shared_db) as server:
        yield server


def require_tmux() -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail("tmux is required for the terminal tests (SAFEDB_REQUIRE_ALL=1)")
        pytest.skip("tmux is not installed")


THIS_CHECKOUT = f"PYTHONPATH={Path(__file__).resolve().parents[2] / 'src'}"
"""For `env`: run this checkout's code, not the installed one."""


@contextmanager
def client_in_tmux(url: str, prompt: str, *options: str) -> Iterator[Tmux]:
    """`safedb client URL [options]` in a real terminal of 200 columns and 50 rows, once it shows its prompt."""
    require_tmux()
    command = [sys.executable, "-m", "safedb", "client", url, *options]
    terminal = Tmux(["env", "TERM=xterm-256color", THIS_CHECKOUT, *command])
    try:
        terminal.wait_for(prompt)
        yield terminal
    finally:
        terminal.close()


@pytest.fixture
def client_terminal(served: ServerProcess) -> Iterator[Tmux]:
    with client_in_tmux(served.url, "SafeDB>") as terminal:
        yield terminal


@pytest.fixture
def feature_terminal(server_url: str) -> Iterator[Tmux]:
    """The client against the feature server, which asks whatever message a test gives it."""
    with client_in_tmux(server_url, "Feature Server>") as terminal:
        yield terminal


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


# Typed at the client's prompt: a JSON string (`key:=`), its line breaks as `\n` escapes. The header below is SafeDB's,
# at another URL; the feature server that sends it calls itself "Feature Server".
FAKE_HEADER = (
    r"-- Question from the server --\nServer: SafeDB at http://127.0.0.1:8000/mcp\nTool:   execute_query\n"
    r"Message:\n  SafeDB needs your approval"
)
CONFIRM_ONLY = '{"type":"object","properties":{"confirm":{"type":"boolean"}}}'


def _ask_with_message(terminal: Tmux, message: str) -> None:
    terminal.type(f"call ask_for requested_schema:='{CONFIRM_ONLY}' message:='\"{message}\"'")
    terminal.wait_for("Answer: [a]ccept and fill in, [d]ecline, [c]ancel:")


def _server_lines(screen: str) -> list[str]:
    return [line.strip() for line in screen.splitlines() if line.strip().startswith("Server: ")]


def test_a_servers_empty_lines_cannot_push_its_name_out_of_view(feature_terminal: Tmux) -> None:
    """120 line breaks pushed the client's own `Server:` line out of the terminal's 50 rows, leaving in view
    only the header the message drew below them, which names another server (red team, p8)."""
    terminal = feature_terminal
    _ask_with_message(terminal, "innocuous" + r"\n" * 121 + FAKE_HEADER)
    in_view = terminal.in_view()
    lines = _server_lines(in_view)
    assert len(lines) == 2, in_view
    assert lines[0].startswith("Server: Feature Server at http://127.0.0.1:"), in_view
    assert lines[1] == "Server: SafeDB at http://127.0.0.1:8000/mcp"  # the message's, indented as a message
    assert "  ⟨121 line breaks⟩" in in_view.splitlines()
    terminal.type("d")
    terminal.wait_for("form: decline")


def test_a_long_message_is_followed_by_the_servers_name_again(feature_terminal: Tmux) -> None:
    """Lines that draw something push the header out of view as well: below a message longer than the terminal
    shows, the client names the server that asks again, last before the form."""
    terminal = feature_terminal
    _ask_with_message(terminal, r"\n".join(f"line {number}" for number in range(1, 61)) + r"\n" + FAKE_HEADER)
    in_view = terminal.in_view()
    lines = _server_lines(in_view)
    assert lines[-1].startswith("Server: Feature Server at http://127.0.0.1:"), in_view
    assert lines[-1].endswith("(again: the message above takes 65 lines)")
    assert "Server: SafeDB at http://127.0.0.1:8000/mcp" in lines  # the message's own, above it
    terminal.type("d")
    terminal.wait_for("form: decline")


def test_a_handshake_era_session_the_server_forgot_is_opened_again(demo_db: Path) -> None:
    """After the server restarted, every command printed `Session not found` until the client was quit."""
    with contextlib.ExitStack() as first_server:
        first = first_server.enter_context(safedb_serve(demo_db))
        port = first.url.rsplit(":", 1)[1].split("/")[0]
        with client_in_tmux(first.url, "SafeDB>", "--era", "handshake") as terminal:
            terminal.type("list_tables")
            at = terminal.wait_for("invoices")
            first_server.close()  # stopped; the same port again:
            with safedb_serve(demo_db, "--port", port) as second:
                assert second.url == first.url
                terminal.type("list_tables")
                at = terminal.wait_for("no longer knows this session", after=at)
                at = terminal.wait_for("Connected to SafeDB", after=at)
                terminal.type("list_tables")
                terminal.wait_for("invoices", after=at)
