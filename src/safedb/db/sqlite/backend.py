"""`SqliteDatabase`: the `Database` protocol over one SQLite file."""

from __future__ import annotations

import logging
import queue
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from safedb.db.backend import (
    ColumnInfo,
    Impact,
    QueryLimits,
    ResultSet,
    TableDescription,
    TableInfo,
    WriteOutcome,
)
from safedb.db.results import fetch_capped
from safedb.db.sqlite import connections
from safedb.db.sqlite.connections import Authorizer, GuardedConnection, quote_identifier
from safedb.db.sqlite.impact import measure_impact
from safedb.db.sqlite.inspector import inspect_statement, shadow_table_names
from safedb.errors import QueryFailed
from safedb.sql.classification import ChangeKind, Classification, ObjectType
from safedb.sql.sqlite_actions import (
    Action,
    AuthorizerEvent,
    is_internal_table,
    is_read_event,
    is_shadow_bookkeeping,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The schema name SQLite gives the copy it builds while running VACUUM.
VACUUM_SCHEMA = "vacuum_db"

# Statements SQLite will not run inside a transaction, or that take effect outside it.
_OUTSIDE_TRANSACTION = frozenset({ChangeKind.VACUUM, ChangeKind.ATTACH, ChangeKind.DETACH, ChangeKind.PRAGMA})

_CATALOG_SQL = (
    "SELECT name, type, sql FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite!_%' "
    "ESCAPE '!' ORDER BY name"
)


def approved_only(approved: Classification, shadow_tables: frozenset[str]) -> Authorizer:
    """An authorizer that allows the approved statement's own actions and plain reads, nothing else.

    Allowed besides: what SQLite and virtual table modules do on their own behalf while running it.
    VACUUM runs statements of its own on a temporary `vacuum_db` schema, and the file it attaches must
    be the one that was approved (checked here again, at run time, by SQLite's own view). Virtual table
    modules (FTS, R-Tree) read and write their shadow tables, and create them with a new virtual table.
    A pragma run through its table-valued form is allowed when that pragma was approved.
    """
    allowed = approved.engine_view
    pragmas = {c.target.name for c in approved.changes if c.kind is ChangeKind.PRAGMA}
    new_virtual_tables = tuple(
        f"{c.target.name}_"
        for c in approved.changes
        if c.kind is ChangeKind.CREATE and c.target.type is ObjectType.VIRTUAL_TABLE
    )
    vacuum_files = {
        "" if change.target.type is ObjectType.DATABASE else change.target.name
        for change in approved.changes
        if change.kind is ChangeKind.VACUUM
    }

    def authorize(code: int, arg1: str | None, arg2: str | None, schema: str | None, source: str | None) -> int:
        event = AuthorizerEvent(code, arg1, arg2, schema, source)
        # SQLite reports schema (re)loading as updates of its own catalog; they change nothing.
        schema_load = code == Action.UPDATE and is_internal_table(arg1) and arg1 != "sqlite_sequence"
        vacuum_step = bool(vacuum_files) and (
            schema == VACUUM_SCHEMA or code == Action.TRANSACTION or (code == Action.ATTACH and arg1 in vacuum_files)
        )
        module_step = is_shadow_bookkeeping(event, shadow_tables) or (
            source is None
            and bool(new_virtual_tables)
            and (
                (arg1 or "").startswith(new_virtual_tables)
                or (arg2 or "").startswith(new_virtual_tables)
                or (is_internal_table(arg1) and arg1 != "sqlite_sequence")  # recording the shadow tables
            )
        )
        pragma_step = code == Action.PRAGMA and (arg1 or "").lower() in pragmas
        permitted = event in allowed or is_read_event(event) or schema_load or vacuum_step or module_step or pragma_step
        return sqlite3.SQLITE_OK if permitted else sqlite3.SQLITE_DENY

    return authorize


class SqliteDatabase:
    """One SQLite file: a small pool of read-only readers and one writer, used from worker threads."""

    def __init__(self, path: Path, limits: QueryLimits, *, readers: int = 4, label: str | None = None) -> None:
        connections.check_database_file(path)
        self.path = path
        self.limits = limits
        self._label = label or f"sqlite {path.name}"
        self._readers: queue.SimpleQueue[GuardedConnection] = queue.SimpleQueue()
        self._all_readers = [connections.open_reader(path) for _ in range(readers)]
        for reader in self._all_readers:
            self._readers.put(reader)
        self._writer = connections.open_writer(path)

    @property
    def label(self) -> str:
        return self._label

    @contextmanager
    def _reader(self, seconds: float) -> Iterator[sqlite3.Connection]:
        reader = self._readers.get()
        try:
            with reader.session(seconds) as connection:
                yield connection
        finally:
            self._readers.put(reader)

    async def _in_thread(self, work: Callable[[], T]) -> T:
        """Run blocking database work in a worker thread; if the call is cancelled, interrupt SQLite so the
        connection is freed at once (an interrupted write rolls back)."""
        held: list[sqlite3.Connection] = []
        token = connections.HELD_CONNECTIONS.set(held)
        try:
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            for connection in held:
                connection.interrupt()
            raise
        finally:
            connections.HELD_CONNECTIONS.reset(token)

    async def classify(self, sql: str) -> Classification:
        def work() -> Classification:
            with self._reader(self.limits.statement_timeout) as connection:
                return inspect_statement(connection, sql)

        return await self._in_thread(work)

    async def read(self, classification: Classification) -> ResultSet:
        if not classification.read_only:
            raise ValueError("read() takes read-only statements only")

        def work() -> ResultSet:
            with self._reader(self.limits.statement_timeout) as connection:
                cursor = connection.execute(classification.statement)
                columns = [column[0] for column in cursor.description or ()]
                return fetch_capped(cursor, columns, self.limits)

        return await self._in_thread(work)

    async def preview(self, classification: Classification) -> Impact:
        def work() -> Impact:
            with self._writer.session(self.limits.preview_timeout) as connection:
                authorizer = approved_only(classification, shadow_table_names(connection))
                return measure_impact(connection, classification, authorizer)

        return await self._in_thread(work)

    async def write(self, approved: Classification) -> WriteOutcome:
        def work() -> WriteOutcome:
            with self._writer.session(self.limits.statement_timeout) as connection:
                return self._run_approved(connection, approved)

        return await self._in_thread(work)

    def _run_approved(self, connection: sqlite3.Connection, approved: Classification) -> WriteOutcome:
        in_transaction = not any(kind in _OUTSIDE_TRANSACTION for kind in approved.kinds)
        if in_transaction:
            connection.execute("BEGIN IMMEDIATE")
        try:
            connection.set_authorizer(approved_only(approved, shadow_table_names(connection)))
            cursor = connection.execute(approved.statement)
            connection.set_authorizer(None)
            columns = [column[0] for column in cursor.description or ()]
            returned = fetch_capped(cursor, columns, self.limits) if columns else None
            cursor.fetchall()  # finish the statement even when RETURNING rows were capped
            if in_transaction:
                connection.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            connection.set_authorizer(None)
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            if "not authorized" in str(exc):
                raise QueryFailed(
                    "The statement now does something that was not approved (the schema may have changed "
                    "since the question was asked). Nothing was changed; ask again."
                ) from exc
            raise
        rows = cursor.rowcount if cursor.rowcount >= 0 else None
        return WriteOutcome(rows_affected=rows, returned=returned)

    async def list_tables(self) -> list[TableInfo]:
        def work() -> list[TableInfo]:
            with self._reader(self.limits.statement_timeout) as connection:
                return [
                    TableInfo(name, _object_type(kind, sql)) for name, kind, sql in connection.execute(_CATALOG_SQL)
                ]

        return await self._in_thread(work)

    async def describe_table(self, name: str) -> TableDescription | None:
        def work() -> TableDescription | None:
            with self._reader(self.limits.statement_timeout) as connection:
                catalog = {row[0]: row for row in connection.execute(_CATALOG_SQL)}
                if name not in catalog:
                    return None
                _, kind, sql = catalog[name]
                columns = tuple(
                    ColumnInfo(name=col, type=col_type, nullable=not notnull, default=default, primary_key=pk > 0)
                    for _, col, col_type, notnull, default, pk in connection.execute(
                        'SELECT cid, name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)', (name,)
                    )
                )
                row_count = None
                if kind == "table":
                    (row_count,) = connection.execute(f"SELECT count(*) FROM {quote_identifier(name)}").fetchone()
                return TableDescription(name, _object_type(kind, sql), columns, row_count, sql)

        return await self._in_thread(work)

    async def aclose(self) -> None:
        for reader in self._all_readers:
            reader.close()
        self._writer.close()


def _object_type(kind: str, sql: str | None) -> str:
    if kind == "table" and (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
        return "virtual table"
    return kind
