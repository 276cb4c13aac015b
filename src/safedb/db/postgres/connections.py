"""Pooled psycopg connections with their guards, time limits and error translation.

Two pools: readers (the read-only DSN; every session has `default_transaction_read_only = on`, every
transaction is opened `READ ONLY` and rolled back, and session advisory locks are released whenever a
connection goes back to the pool, so a read leaves nothing behind) and writers (the writer DSN; used
only for approved statements and rolled-back dry runs, and reset with `DISCARD ALL` whenever a
connection goes back to the pool, so nothing an approved statement does to its session outlives the
call).
Pools open lazily, on first use, inside the event loop that uses them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from safedb.errors import DatabaseOpenError, InvalidStatement, QueryFailed, QueryTimeout

logger = logging.getLogger(__name__)

Connection = AsyncConnection[tuple[Any, ...]]

CONNECT_SECONDS = 10.0
# How long past the server-side statement timeout the client waits before giving up on the server.
CLIENT_GRACE_SECONDS = 5.0
_SYNTAX_OR_ACCESS_CLASS = "42"
_INSUFFICIENT_PRIVILEGE = "42501"


def describe_dsn(dsn: str) -> str:
    """`user@host:port/dbname`, never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql (unparsable connection string)"
    user = parts.get("user") or "?"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"{user}@{host}:{port}/{parts.get('dbname') or user}"


def _milliseconds(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


async def set_statement_timeout(connection: Connection, seconds: float, *, local: bool = True) -> None:
    """The server stops any statement of this transaction (or, with local=False, session) after `seconds`."""
    await connection.execute("SELECT set_config('statement_timeout', %s, %s)", (_milliseconds(seconds), local))
    await connection.execute("SELECT set_config('lock_timeout', %s, %s)", (_milliseconds(seconds), local))


async def _configure_json(connection: Connection) -> None:
    """JSON comes back as the server's own text, not as Python objects."""
    for name in ("json", "jsonb"):
        connection.adapters.register_loader(name, TextLoader)


async def _configure_reader(connection: Connection) -> None:
    await _configure_json(connection)
    await connection.execute("SET default_transaction_read_only = on")
    await connection.set_read_only(True)


def read_transaction(connection: Connection) -> AbstractAsyncContextManager[Any]:
    """A transaction on a reader that always rolls back: whatever a function called by a read did that
    PostgreSQL undoes on rollback (a `set_config`, a `pg_notify`) never happens for anyone else."""
    return connection.transaction(force_rollback=True)


async def _reset_reader(connection: Connection) -> None:
    """Release session advisory locks: the one thing a rolled-back read-only transaction can leave behind."""
    await connection.execute("SELECT pg_advisory_unlock_all()")


async def _reset_writer(connection: Connection) -> None:
    """Forget everything an approved statement did to the session: settings, role, locks, listeners..."""
    await connection.execute("DISCARD ALL")


def _pool(dsn: str, size: int, name: str, *, reader: bool) -> AsyncConnectionPool[Connection]:
    return AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=max(1, size),
        open=False,
        name=name,
        timeout=CONNECT_SECONDS,
        kwargs={"autocommit": True, "prepare_threshold": None, "connect_timeout": int(CONNECT_SECONDS)},
        configure=_configure_reader if reader else _configure_json,
        reset=_reset_reader if reader else _reset_writer,
    )


class Pools:
    """The reader and writer pools of one database, opened on first use."""

    def __init__(self, reader_dsn: str, writer_dsn: str, *, readers: int, writers: int) -> None:
        self._reader = _pool(reader_dsn, readers, "safedb-readers", reader=True)
        self._writer = _pool(writer_dsn, writers, "safedb-writers", reader=False)
        self._opened = False
        self._lock: asyncio.Lock | None = None

    async def _ensure_open(self) -> None:
        if self._opened:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._opened:
                return
            try:
                await self._reader.open(wait=True, timeout=CONNECT_SECONDS)
                await self._writer.open(wait=True, timeout=CONNECT_SECONDS)
            except (PoolTimeout, psycopg.Error) as exc:
                await self._close_pools()
                raise DatabaseOpenError(f"Cannot connect to PostgreSQL: {exc}") from exc
            self._opened = True

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Connection]:
        await self._ensure_open()
        try:
            async with self._reader.connection() as connection:
                yield connection
        except PoolTimeout as exc:
            raise QueryFailed("No read-only database connection became free in time; try again.") from exc

    @asynccontextmanager
    async def writer(self) -> AsyncIterator[Connection]:
        await self._ensure_open()
        try:
            async with self._writer.connection() as connection:
                yield connection
        except PoolTimeout as exc:
            raise QueryFailed("No writer database connection became free in time; try again.") from exc

    async def _close_pools(self) -> None:
        await self._reader.close()
        await self._writer.close()

    async def close(self) -> None:
        await self._close_pools()
        self._opened = False


def _message(exc: psycopg.Error) -> str:
    primary = exc.diag.message_primary or (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"{primary} (SQLSTATE {exc.sqlstate})" if exc.sqlstate else primary


@asynccontextmanager
async def translated_errors(seconds: float, *, statement_errors_refuse: bool = False) -> AsyncIterator[None]:
    """Turn psycopg errors into SafeDB's: QueryTimeout, InvalidStatement (for reads: syntax, unknown names)
    or QueryFailed. Only the server's primary message and SQLSTATE are shown, never the query context."""
    try:
        yield
    except psycopg.errors.QueryCanceled as exc:
        raise QueryTimeout(seconds) from exc
    except psycopg.errors.LockNotAvailable as exc:
        raise QueryFailed(
            f"The statement waited longer than {seconds:g} s for a lock held by another session and was stopped."
        ) from exc
    except psycopg.Error as exc:
        sqlstate = exc.sqlstate or ""
        if (
            statement_errors_refuse
            and sqlstate.startswith(_SYNTAX_OR_ACCESS_CLASS)
            and sqlstate != _INSUFFICIENT_PRIVILEGE
        ):
            raise InvalidStatement(f"PostgreSQL cannot run this statement: {_message(exc)}") from exc
        raise QueryFailed(f"The database reported an error: {_message(exc)}") from exc


def quoted(schema: str, name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))
