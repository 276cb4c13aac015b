"""A client killed (SIGKILL) while the question of its call waits: the call is recorded as cancelled, the server
says so in one log line and prints no traceback. Real processes: `safedb serve`, and a real MCP client
(tests/server/undecided_client.py) killed once the question has reached it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.audit import SqliteAuditStore
from tests.helpers import audit_decisions, rows, safedb_serve
from tests.server.undecided_client import DELETE_ONE, HANDSHAKE_VERSION

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0
"""Seconds any one step may take."""
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$")


@dataclass
class UndecidedClient:
    """The client process; its stdout, and its stderr, which in the stdio modes is also the server's."""

    process: subprocess.Popen[str]
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    asked: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    """stderr has reached its end: the client and the server it started have both ended."""

    def kill_when_asked(self) -> str:
        """SIGKILL the client once the question has reached it; the protocol version it spoke."""
        assert self.asked.wait(WAIT), f"the question never reached the client:\n{self.output()}"
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=WAIT)
        return self.stdout[-1].split()[-1]

    def server_pid(self) -> int | None:
        return next((int(line.split()[-1]) for line in self.stderr if line.startswith("server pid ")), None)

    def output(self) -> str:
        return "".join(self.stdout) + "".join(self.stderr)


@contextmanager
def undecided_client(*args: str) -> Iterator[UndecidedClient]:
    """Run tests/server/undecided_client.py; whatever happens, stop it and any server it started (by pid)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.server.undecided_client", *args], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    client = UndecidedClient(process)

    def read_stdout() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            client.stdout.append(line)
            if line.startswith("asked"):
                client.asked.set()

    def read_stderr() -> None:
        assert process.stderr is not None
        client.stderr.extend(process.stderr)
        client.ended.set()

    readers = [threading.Thread(target=read, daemon=True) for read in (read_stdout, read_stderr)]
    for reader in readers:
        reader.start()
    try:
        yield client
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=WAIT)
        if not client.ended.wait(WAIT) and (server := client.server_pid()) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server, signal.SIGKILL)
        for reader in readers:
            reader.join(timeout=WAIT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def log_lines(stderr: list[str]) -> list[re.Match[str]]:
    return [match for line in stderr if (match := LOG_LINE.match(line))]


def decisions(audit_db: Path) -> list[tuple[str, str]]:
    audit = SqliteAuditStore.open(audit_db, readonly=True)
    try:
        return audit_decisions(audit)
    finally:
        audit.close()


@pytest.mark.parametrize("wire", ["stdio", "socketpair"])
def test_stdio_client_killed_while_its_question_waits(demo_db: Path, wire: str) -> None:
    """The server ends with its client, as a stdio server does, but cleanly: the pipes it finds broken (or the
    socket reset) are the client's end of the session, not an error."""
    audit_db = demo_db.parent / "audit.db"
    with undecided_client(wire, str(demo_db), str(audit_db)) as client:
        assert client.kill_when_asked() == HANDSHAKE_VERSION
        assert client.ended.wait(WAIT), f"the server did not end after its client was killed:\n{client.output()}"
    assert "Traceback" not in client.output()
    assert "server exit status 0\n" in client.stderr, client.output()
    [line] = log_lines(client.stderr)  # one line, about the question
    assert line["level"] == "INFO"
    assert "cancelled" in line["message"]
    assert decisions(audit_db) == [("requested", DELETE_ONE), ("cancelled", DELETE_ONE)]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 1") == [(1,)]


@pytest.mark.anyio
async def test_http_client_killed_while_its_question_waits(demo_db: Path) -> None:
    """Over Streamable HTTP a dropped connection is not a cancellation (the SDK keeps the call, which a client may
    resume), so the question waits on; the server answers others meanwhile. When it stops, the waiting call is
    recorded as cancelled, in one line of its own, and nothing prints a traceback."""
    with safedb_serve(demo_db) as server:
        with undecided_client("http", server.url) as client:
            assert client.kill_when_asked() == HANDSHAKE_VERSION
        async with Client(server.url, mode="legacy") as other:
            read = await other.call_tool("execute_query", {"query": "SELECT count(*) FROM invoices"})
        assert read.structured_content is not None
        assert read.structured_content["rows"] == [[8]]
        assert decisions(demo_db.parent / "audit.db") == [("requested", DELETE_ONE)]
    # Stopped (SIGTERM), and its stderr read to the end.
    assert server.process.returncode is not None
    log = "".join(server.log)
    assert "Traceback" not in log
    ours = [line for line in log_lines(server.log) if line["logger"].startswith("safedb")]
    assert [(line["level"], "cancelled" in line["message"]) for line in ours] == [("INFO", True)], log
    assert decisions(demo_db.parent / "audit.db") == [("requested", DELETE_ONE), ("cancelled", DELETE_ONE)]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 1") == [(1,)]
