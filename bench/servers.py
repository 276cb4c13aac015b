"""Start and stop the servers under test as subprocesses, each on a free loopback port."""

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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVING = re.compile(r"serving .* at (http://\S+/mcp)")
"""How `safedb serve` (and the reference server) say where they listen."""
_LOG_LINES = 5000


@dataclass(frozen=True)
class ServerKind:
    name: str
    description: str
    module: str
    safedb: bool
    """Runs `safedb serve` (audit log and data directory in the work directory)."""


SAFEDB = ServerKind("safedb", "`safedb serve` as shipped (defaults)", "safedb", safedb=True)
REFERENCE = ServerKind(
    "reference", "plain `MCPServer`, same tool and file, no safety layer", "bench.reference_server", safedb=False
)


@dataclass
class ServerProcess:
    """A server in a process (and process group) of its own: its URL and its stderr so far."""

    process: subprocess.Popen[str]
    url: str
    log: list[str]

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port


def command(kind: ServerKind, database: Path, workdir: Path, serial: int) -> list[str]:
    if kind.safedb:
        return [
            sys.executable, "-m", kind.module, "serve", "--database", str(database), "--host", "127.0.0.1",
            "--port", "0", "--data-dir", str(workdir / "data"), "--audit-db", str(workdir / f"audit-{serial}.db"),
        ]  # fmt: skip
    return [sys.executable, "-m", kind.module, "--database", str(database), "--host", "127.0.0.1", "--port", "0"]


@contextmanager
def running(kind: ServerKind, database: Path, workdir: Path, serial: int = 0) -> Iterator[ServerProcess]:
    """Start `kind` on `database`; yield once it prints its URL; always stop it."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    command_line = command(kind, database, workdir, serial)
    with serving_process(command_line, env={"PYTHONPATH": pythonpath}, cwd=REPO_ROOT, start_timeout=60) as server:
        yield server


@contextmanager
def serving_process(
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    start_timeout: float = 30,
    ready: re.Pattern[str] = SERVING,
) -> Iterator[ServerProcess]:
    """Start a server command (`env` added to this process's environment); yield once its stderr shows
    `ready`, whose group 1 is the URL; always stop it, its whole process group.

    A thread keeps reading the server's stderr, so its log never blocks it and is there to read on failure
    (its first `_LOG_LINES` lines).
    """
    process = subprocess.Popen(
        command, cwd=cwd, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    log: list[str] = []
    found: list[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if len(log) < _LOG_LINES:
                log.append(line)
            if not found and (match := ready.search(line)):
                found.append(match.group(1))
                listening.set()
        listening.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not listening.wait(timeout=start_timeout) or not found:
            raise RuntimeError(f"{command} did not start listening:\n" + "".join(log[-40:]))
        yield ServerProcess(process, found[0], log)
    finally:
        _stop_group(process)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def _stop_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the process group, SIGKILL if it has not ended within 15 s."""
    with contextlib.suppress(ProcessLookupError):  # the whole group has already ended
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
