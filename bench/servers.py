"""Start and stop the servers under test as subprocesses, each on a free loopback port."""

from __future__ import annotations

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
_SERVING = re.compile(r"serving .* at (http://\S+/mcp)")


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
class RunningServer:
    kind: ServerKind
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
def running(kind: ServerKind, database: Path, workdir: Path, serial: int = 0) -> Iterator[RunningServer]:
    """Start `kind` on `database`; yield once it prints its URL; always stop it (its process group)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        command(kind, database, workdir, serial), cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    log: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if len(log) < 2000:
                log.append(line)
            if not found and (match := _SERVING.search(line)):
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout=60) or not found:
            raise RuntimeError(f"{kind.name} did not start:\n" + "".join(log[-40:]))
        yield RunningServer(kind, process, found[0], log)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
