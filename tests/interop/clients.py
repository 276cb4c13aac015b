"""The third-party clients of the interoperability suite, and how to run one of them against SafeDB.

A `Case` is one client in one protocol mode over one transport. `run_case` gives it a fresh demo database,
serves it (`safedb serve` over HTTP, or lets the client start `safedb serve --transport stdio` itself), runs the
client's driver (drivers/, in the client's own environment) and collects three things: the driver's report,
the invoice ids left in the database (read through a connection of its own) and the audit log's decisions.
`CaseRun.problems()` lists everything that differs from what a working client and server must show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safedb.audit import SqliteAuditStore
from safedb.db.demo import ensure_demo_database
from tests.helpers import audit_decisions, rows, safedb_serve
from tests.interop.environments import node_project, python_environment

DRIVERS = Path(__file__).resolve().parent / "drivers"
HANDSHAKE_ERA = "2025-11-25"
MODERN_ERA = "2026-07-28"

READ = "SELECT count(*) FROM invoices"
ACCEPT = "DELETE FROM invoices WHERE id = 7"
DECLINE = "DELETE FROM invoices WHERE id = 8"
ANSWER = {"confirm": True, "justification": "interoperability test cleanup", "environment": "Development"}
INVOICES_AFTER = [1, 2, 3, 4, 5, 6, 8]
SAFETY_FIELDS = ["confirm", "environment", "justification"]
REPORT_PREFIX = "INTEROP-REPORT "


@dataclass(frozen=True)
class Driver:
    """How to start a client's driver: the command (its JSON config is appended) and extra config."""

    command: list[str]
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Client:
    key: str
    name: str
    package: str
    version: str
    modes: dict[str, str]
    """Each mode the driver is run in, with the protocol version it must negotiate."""
    transports: tuple[str, ...]
    install: Callable[[], Driver]


@dataclass(frozen=True)
class Case:
    client: Client
    mode: str
    transport: str

    @property
    def id(self) -> str:
        return f"{self.client.key}-{self.mode}-{self.transport}"

    @property
    def protocol_version(self) -> str:
        return self.client.modes[self.mode]


def _python_driver(venv: str, requirement: str, script: str) -> Callable[[], Driver]:
    def install() -> Driver:
        return Driver([str(python_environment(venv, requirement)), str(DRIVERS / script)])

    return install


def _typescript_client() -> Driver:
    project = node_project("ts-client-2.4.0", "@modelcontextprotocol/client@2.4.0")
    # ES modules resolve packages from the importing file's directory: the driver runs from inside the project.
    source = (DRIVERS / "ts_client.mjs").read_text()
    driver = project.directory / "safedb-interop-driver.mjs"
    if not driver.exists() or driver.read_text() != source:
        staged = driver.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(source)
        staged.replace(driver)
    return Driver([str(project.node), str(driver)])


def _inspector() -> Driver:
    project = node_project("inspector-2.12.0", "@modelcontextprotocol/inspector@2.12.0")
    extra = {"node": str(project.node), "mcpdo": str(project.bin("mcpdo"))}
    return Driver([sys.executable, str(DRIVERS / "inspector_mcpdo.py")], extra)


BOTH = {"legacy": HANDSHAKE_ERA, "auto": MODERN_ERA}
CLIENTS = (
    Client(
        "mcp-1.30", "Python SDK `ClientSession`", "mcp", "1.30.0", {"legacy": HANDSHAKE_ERA}, ("http", "stdio"),
        _python_driver("mcp-1.30.0", "mcp==1.30.0", "mcp_v1_session.py"),
    ),
    Client(
        "mcp-2.3", "Python SDK `Client`", "mcp", "2.3.0", BOTH, ("http", "stdio"),
        _python_driver("mcp-2.3.0", "mcp==2.3.0", "mcp_v2_client.py"),
    ),
    Client(
        "fastmcp-4.1.6", "FastMCP `Client`", "fastmcp-slim[client]", "4.1.6", BOTH, ("http", "stdio"),
        _python_driver("fastmcp-slim-4.1.6", "fastmcp-slim[client]==4.1.6", "fastmcp_client.py"),
    ),
    Client(
        "ts-client-2.4", "TypeScript SDK `Client`", "@modelcontextprotocol/client", "2.4.0", BOTH, ("http", "stdio"),
        _typescript_client,
    ),
    Client(
        "inspector-2.12", "MCP Inspector `mcpdo`", "@modelcontextprotocol/inspector", "2.12.0",
        {"legacy": HANDSHAKE_ERA, "modern": MODERN_ERA}, ("http", "stdio"), _inspector,
    ),
)  # fmt: skip

CASES = tuple(
    Case(client, mode, transport) for client in CLIENTS for mode in client.modes for transport in client.transports
)


@dataclass
class CaseRun:
    case: Case
    report: dict[str, Any] | None
    invoice_ids: list[int]
    decisions: list[tuple[str, str]]
    returncode: int
    output: str
    seconds: float

    def problems(self) -> list[str]:
        """Everything that differs from a client and server that work together; empty when all is well."""
        found: list[str] = []
        if self.returncode != 0:
            found.append(f"driver exited with {self.returncode}")
        if self.report is None:
            return [*found, "the driver printed no report"]
        report = self.report
        client = self.case.client
        if report.get("version") != client.version:
            found.append(f"client version {report.get('version')}, expected {client.version}")
        if report.get("protocol_version") != self.case.protocol_version:
            found.append(f"negotiated {report.get('protocol_version')}, expected {self.case.protocol_version}")
        if "execute_query" not in report.get("tools", []):
            found.append(f"tools/list lacks execute_query: {report.get('tools')}")
        steps = report.get("steps", {})
        found += _check_step(steps.get("read"), "read", elicited=False, structured={"rows": [[8]]})
        found += _check_step(
            steps.get("accept"), "accept", elicited=True, structured={"status": "executed", "rows_affected": 1}
        )
        found += _check_step(steps.get("decline"), "decline", elicited=True, structured={"status": "declined"})
        if self.invoice_ids != INVOICES_AFTER:
            found.append(f"database holds invoices {self.invoice_ids}, expected {INVOICES_AFTER}")
        for decision in (("executed", ACCEPT), ("declined", DECLINE)):
            if decision not in self.decisions:
                found.append(f"audit log lacks {decision}: {self.decisions}")
        return found

    def summary(self) -> dict[str, Any]:
        """What the compatibility table is made of."""
        return {
            "id": self.case.id,
            "client": self.case.client.name,
            "package": self.case.client.package,
            "version": (self.report or {}).get("version"),
            "mode": self.case.mode,
            "transport": self.case.transport,
            "protocol_version": (self.report or {}).get("protocol_version"),
            "problems": self.problems(),
            "seconds": round(self.seconds, 1),
        }


def _check_step(step: dict[str, Any] | None, name: str, *, elicited: bool, structured: dict[str, Any]) -> list[str]:
    if step is None:
        return [f"{name}: not run"]
    if step.get("error"):
        return [f"{name}: {step['error']}"]
    found: list[str] = []
    asked = step.get("elicitations", [])
    if not elicited and asked:
        found.append(f"{name}: elicited {len(asked)} time(s), expected no elicitation")
    if elicited:
        if len(asked) != 1:
            found.append(f"{name}: elicited {len(asked)} time(s), expected once")
        for question in asked:
            if question.get("mode") != "form" or question.get("fields") != SAFETY_FIELDS:
                found.append(f"{name}: asked {question.get('mode')} {question.get('fields')}, expected the form")
            if (ACCEPT if name == "accept" else DECLINE) not in question.get("message", ""):
                found.append(f"{name}: the question does not show the statement")
    result = step.get("result") or {}
    if result.get("is_error"):
        found.append(f"{name}: tool error: {result.get('text')}")
    content = result.get("structured") or {}
    for key, value in structured.items():
        if content.get(key) != value:
            found.append(f"{name}: {key} = {content.get(key)!r}, expected {value!r} ({result.get('text')!r})")
    return found


def run_case(case: Case, workdir: Path, driver: Driver) -> CaseRun:
    """Run one case on a fresh demo database in `workdir`; `driver` comes from `case.client.install()`."""
    database = ensure_demo_database(workdir / "data")
    audit_path = workdir / "data" / "audit.db"
    config: dict[str, Any] = {
        "mode": case.mode,
        "statements": {"read": READ, "accept": ACCEPT, "decline": DECLINE},
        "answer": ANSWER,
        "extra": driver.extra,
    }
    started = time.monotonic()
    if case.transport == "http":
        with safedb_serve(database) as server:
            returncode, output = _run_driver(driver, {**config, "url": server.url}, workdir)
    else:
        stdio = {
            "command": sys.executable,
            "args": ["-m", "safedb", "serve", "--transport", "stdio", "--database", str(database)],
            "env": {"SAFEDB_AUDIT_DB": str(audit_path), "SAFEDB_LOG_LEVEL": "warning"},
        }
        returncode, output = _run_driver(driver, {**config, **stdio}, workdir)
    seconds = time.monotonic() - started
    report = None
    for line in output.splitlines():
        if line.startswith(REPORT_PREFIX):
            report = json.loads(line.removeprefix(REPORT_PREFIX))
    invoice_ids = [row[0] for row in rows(database, "SELECT id FROM invoices ORDER BY id")]
    return CaseRun(case, report, invoice_ids, _decisions(audit_path), returncode, output, seconds)


def _decisions(audit_path: Path) -> list[tuple[str, str]]:
    if not audit_path.exists():
        return []
    with _closing(SqliteAuditStore.open(audit_path, readonly=True)) as audit:
        return audit_decisions(audit)


@contextmanager
def _closing(audit: SqliteAuditStore) -> Iterator[SqliteAuditStore]:
    try:
        yield audit
    finally:
        audit.close()


def _run_driver(driver: Driver, config: dict[str, Any], workdir: Path, timeout: float = 180) -> tuple[int, str]:
    """Run the driver in a process group of its own; whatever happens, nothing of it outlives this call."""
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    process = subprocess.Popen(
        [*driver.command, json.dumps(config)], cwd=workdir, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        return -1, f"driver timed out after {timeout} s\n{output}"
    finally:
        _kill_group(process)
    return process.returncode, output


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Stop what is left of the driver's process group (a stdio server it started, say)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    except PermissionError:
        return
    if process.poll() is None:
        process.wait(timeout=10)
