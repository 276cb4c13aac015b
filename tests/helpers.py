"""Shared test helpers: a scripted elicitation responder, a direct look at the database, a real server process."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from bench.servers import ServerProcess, serving_process
from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.db.sqlite import SqliteDatabase
from safedb.server.app import build_server
from safedb.settings import Environment, Policy, Settings, Target

SAFETY_FIELDS = {"confirm", "justification", "environment"}

T = TypeVar("T")


async def watching_the_loop(work: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """Await `work()`; return its result and the longest the event loop was held up meanwhile (how much
    later than asked a task sleeping 5 ms at a time woke up)."""
    longest = 0.0
    done = anyio.Event()
    results: list[T] = []

    async def watch() -> None:
        nonlocal longest
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.005)
            now = time.monotonic()
            longest = max(longest, now - last - 0.005)
            last = now

    async def run() -> None:
        try:
            results.append(await work())
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        group.start_soon(run)
    return results[0], longest


async def watching_the_loop_while_locked(
    path: Path, lock: Sequence[str], work: Callable[[], Awaitable[T]]
) -> tuple[T, float]:
    """Run the `lock` statements on another connection to the SQLite file `path`, keeping their transaction
    open, and commit it 0.5 s later; meanwhile await `work()` as `watching_the_loop` does."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        for statement in lock:
            other.execute(statement).fetchall()

        async def commit_later() -> None:
            await anyio.sleep(0.5)
            other.execute("COMMIT")

        async with anyio.create_task_group() as group:
            group.start_soon(commit_later)
            return await watching_the_loop(work)
    finally:
        other.close()


@dataclass
class Responder:
    """An elicitation callback that answers every question the same way and remembers what it was asked."""

    action: str = "accept"
    content: dict[str, Any] | None = field(
        default_factory=lambda: {"confirm": True, "justification": "cleanup of test rows", "environment": "Development"}
    )
    asked: list[ElicitRequestFormParams | ElicitRequestURLParams] = field(default_factory=list)

    async def __call__(self, context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        self.asked.append(params)
        if self.action == "accept":
            return ElicitResult(action="accept", content=self.content)
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


@asynccontextmanager
async def in_process_server(
    path: Path, policy: Policy | None = None, environment: Environment = Environment.DEVELOPMENT, **settings: Any
) -> AsyncIterator[tuple[MCPServer, SqliteAuditStore]]:
    """A SafeDB server for `path` (one target named `test`), in this process, its audit log beside the database."""
    target = Target(name="test", environment=environment, policy=policy or Policy())
    config = Settings(targets=(target,), **settings)
    database = SqliteDatabase(path, config.limits, readers=config.readers)
    audit = SqliteAuditStore.open(path.parent / "audit.db")
    try:
        yield build_server(config, {target.name: database}, audit), audit
    finally:
        await database.aclose()
        audit.close()


def audit_decisions(audit: SqliteAuditStore) -> list[tuple[str, str]]:
    """(decision, sql) of every audit record, oldest first."""
    return [(str(record.decision), record.sql) for record in audit.records(AuditQuery(limit=None))]


def rows(path: Path, sql: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Query the database through a connection of its own, not the server's."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def scratch_table(path: Path, count: int = 3) -> str:
    """A new table with `count` rows (ids 1..count), named uniquely so tests sharing a server stay apart."""
    name = f"scratch_{uuid.uuid4().hex[:10]}"
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, label TEXT)")
        connection.executemany(f"INSERT INTO {name} VALUES (?, ?)", [(i, f"row {i}") for i in range(1, count + 1)])
        connection.commit()
    finally:
        connection.close()
    return name


@contextmanager
def safedb_serve(database: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """Run `safedb serve` on `database` and a free port, its audit log beside the database."""
    command = [sys.executable, "-m", "safedb", "serve", "--database", str(database), "--port", "0", *extra]
    audit = {"SAFEDB_AUDIT_DB": str(database.parent / "audit.db")}
    with serving_process(command, env={**audit, **(env or {})}) as server:
        yield server


# Database-wide settings stored in the file (foreign_keys and friends belong to one connection).
SNAPSHOT_PRAGMAS = (
    "user_version", "application_id", "journal_mode", "page_size", "auto_vacuum", "encoding", "schema_version",
    "page_count", "freelist_count",
)  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    """Everything a statement could change in one database, read through a connection of its own."""

    schema: tuple[tuple[Any, ...], ...]
    rows: dict[str, list[tuple[Any, ...]]]
    pragmas: dict[str, Any]
    files: tuple[str, ...]


def database_snapshot(path: Path) -> Snapshot:
    """Schema (main), every row of every table (SQLite's own included), the file-level pragmas, and the
    names of the files in the database's directory. Opened read-only, so looking changes nothing."""
    connection = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        schema = tuple(
            connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name, tbl_name")
        )
        rows = {}
        for (table,) in connection.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"):
            quoted = '"' + table.replace('"', '""') + '"'
            rows[table] = sorted(connection.execute(f"SELECT * FROM {quoted}"), key=repr)
        pragmas = {name: connection.execute(f"PRAGMA {name}").fetchone()[0] for name in SNAPSHOT_PRAGMAS}
    finally:
        connection.close()
    return Snapshot(schema=schema, rows=rows, pragmas=pragmas, files=tuple(sorted(os.listdir(path.parent))))
