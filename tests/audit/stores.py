"""One audit log for a test, kept in either store: an SQLite file, or a fresh schema on the PostgreSQL server.

`AuditLog.open()` opens its store; `tampering()` is a connection of an intruder's own with the append-only
triggers out of the way (dropped in SQLite; disabled by the superuser in PostgreSQL); `connect()` is a
plain connection as the role SafeDB appends with, triggers in place. Both take `?` placeholders and see
`audit_log` and `audit_head` unqualified.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg

from safedb.audit import PostgresAuditStore, SqliteAuditStore
from tests.audit.helpers import TRIGGERS
from tests.postgres_server import SUPERUSER, WRITER, PostgresServer

Store = SqliteAuditStore | PostgresAuditStore

PG_TRIGGERS = (*TRIGGERS, "audit_log_no_truncate", "audit_head_no_truncate")


class Cursorish(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class LogConnection(Protocol):
    """What tampering needs of a connection: `execute` with `?` placeholders."""

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Cursorish: ...

    def rollback(self) -> None: ...

    def commit(self) -> None: ...


class AuditLog(Protocol):
    kind: str
    location: str
    """What `--audit-db` takes: the file path, or the URL (with `?audit_schema=`)."""
    errors: tuple[type[Exception], ...]
    """What the database raises when a trigger refuses a statement."""

    def open(self, *, readonly: bool = False) -> Store: ...

    def tampering(self) -> AbstractContextManager[LogConnection]: ...

    def connect(self) -> AbstractContextManager[LogConnection]: ...


@dataclass
class SqliteLog:
    path: Path
    kind: str = "sqlite"
    errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)

    @property
    def location(self) -> str:
        return str(self.path)

    def open(self, *, readonly: bool = False) -> Store:
        return SqliteAuditStore.open(self.path, readonly=readonly)

    @contextmanager
    def tampering(self) -> Iterator[LogConnection]:
        connection = sqlite3.connect(self.path)
        try:
            for trigger in TRIGGERS:
                connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            yield connection
            connection.commit()
        finally:
            connection.close()

    @contextmanager
    def connect(self) -> Iterator[LogConnection]:
        connection = sqlite3.connect(self.path)
        try:
            yield connection
        finally:
            connection.rollback()
            connection.close()


class _PostgresConnection:
    """A psycopg connection taking `?` placeholders, in a transaction, the audit schema first on the path."""

    def __init__(self, connection: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.connection = connection

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Cursorish:
        return self.connection.execute(statement.replace("?", "%s").encode(), list(parameters))

    def rollback(self) -> None:
        self.connection.rollback()

    def commit(self) -> None:
        self.connection.commit()


@dataclass
class PostgresLog:
    server: PostgresServer
    database: str
    schema: str
    role: str = WRITER
    kind: str = "postgres"
    errors: tuple[type[Exception], ...] = (psycopg.Error,)

    @property
    def url(self) -> str:
        return self.server.url(self.role, self.database)

    @property
    def location(self) -> str:
        return f"{self.url}?audit_schema={self.schema}"

    def open(self, *, readonly: bool = False) -> Store:
        return PostgresAuditStore.open(self.url, schema=self.schema, readonly=readonly)

    @contextmanager
    def tampering(self) -> Iterator[LogConnection]:
        """As the superuser, with the triggers of both tables disabled (they stay disabled)."""
        with self._connection(SUPERUSER) as connection:
            for table in ("audit_log", "audit_head"):
                connection.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            yield connection

    def connect(self) -> AbstractContextManager[LogConnection]:
        return self._connection(self.role)

    @contextmanager
    def _connection(self, role: str) -> Iterator[LogConnection]:
        url = self.server.url(role, self.database)
        with psycopg.connect(url, connect_timeout=10, options=f"-c search_path={self.schema}") as connection:
            yield _PostgresConnection(connection)


def new_schema() -> str:
    return f"audit_{uuid.uuid4().hex[:12]}"
