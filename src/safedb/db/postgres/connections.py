"""Pooled psycopg connections with their guards, time limits and error translation.

Two pools: readers (the read-only DSN; every session has `default_transaction_read_only = on`, every
transaction is opened `READ ONLY` and rolled back, and session advisory locks are released whenever a
connection goes back to the pool, so a read leaves nothing behind) and writers (the writer DSN; used
only for approved statements and rolled-back dry runs, and reset with `DISCARD ALL` whenever a
connection goes back to the pool, so nothing an approved statement does to its session outlives the
call).
Both pools' sessions have the same settings (set when a connection is made, and on a writer again after
`DISCARD ALL`): string literals read the way SafeDB's parser reads them (`standard_conforming_strings`),
and the reader's search path, so that a name in a statement means the same table to the checks made as
the reader and to the dry run and the approved statement run as the writer.
Pools open lazily, on first use, inside the event loop that uses them.
"""

from __future__ import annotations

import asyncio
import logging
import select
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.abc import Buffer, Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.types import datetime as datetime_types
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


def error_reason(exc: BaseException, *dsns: str) -> str:
    """The first line of an error about connecting with `dsns`, without their passwords: psycopg repeats a connection
    string it cannot parse, whole, and a server may echo what it was given."""
    primary = exc.diag.message_primary if isinstance(exc, psycopg.Error) and exc.diag is not None else None
    text = primary or next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    for dsn in dsns:
        text = text.replace(dsn, describe_dsn(dsn))
        try:
            password = conninfo_to_dict(dsn).get("password")
        except psycopg.ProgrammingError:
            password = None
        if password:
            text = text.replace(str(password), "***")
    return text


def milliseconds(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


async def set_statement_timeout(connection: Connection, seconds: float, *, local: bool = True) -> None:
    """The server stops any statement of this transaction (or, with local=False, session) after `seconds`."""
    limit = milliseconds(seconds)
    await connection.execute(
        "SELECT pg_catalog.set_config('statement_timeout', %s, %s), pg_catalog.set_config('lock_timeout', %s, %s)",
        (limit, local, limit, local),
    )


def read_transaction(connection: Connection) -> AbstractAsyncContextManager[Any]:
    """A transaction on a reader that always rolls back: whatever a function called by a read did that
    PostgreSQL undoes on rollback (a `set_config`, a `pg_notify`) never happens for anyone else."""
    return connection.transaction(force_rollback=True)


# With the legacy `off`, `'x\'' , f() --'` is one string to SafeDB's parser (pglast) and a call of f() to the
# server.
_STRING_SETTINGS = {"standard_conforming_strings": "on"}
# The schemas a session's search path actually reaches: those that exist and that its role may use. Without
# pg_catalog, which PostgreSQL then searches first: SafeDB's catalog queries name the system catalogs without a
# schema, and a path naming it after another schema (`public, pg_catalog`) would let a `public.pg_trigger` take
# the place of the real one in them (`shadowing` checks functions and operators, not relations).
_EFFECTIVE_SEARCH_PATH_SQL = (
    "SELECT pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.quote_ident(s) "
    "FROM pg_catalog.unnest(pg_catalog.current_schemas(false)) AS s "
    "WHERE s OPERATOR(pg_catalog.<>) 'pg_catalog'), ', ')"
)


async def _effective_search_path(connection: Connection) -> str:
    cursor = await connection.execute(_EFFECTIVE_SEARCH_PATH_SQL)
    row = await cursor.fetchone()
    assert row is not None
    return str(row[0])


async def _reader_search_path(reader_dsn: str) -> str:
    """The schemas the reader's search path reaches, spelled out. Both pools search exactly these, so that a
    name means the same table to the checks made as the reader and to the writer: a `$user` schema, or one
    the reader may not use, would otherwise be searched by one role and skipped by the other.

    Warns, too, when the reader could change the database (`reader_powers`)."""
    async with await psycopg.AsyncConnection.connect(
        reader_dsn, autocommit=True, connect_timeout=int(CONNECT_SECONDS)
    ) as connection:
        if powers := await reader_powers(connection):
            logger.warning(
                "The read-only role %s %s. Reads still run in READ ONLY transactions, but any statement SafeDB "
                "misjudged as a read would run with these powers: give the role only SELECT (docs/postgres.md).",
                connection.info.user,
                "; ".join(powers),
            )
        return await _effective_search_path(connection)


# Predefined roles that reach the server's files and programs, or other sessions, even from a read-only transaction.
_SERVER_POWER_ROLES = [
    "pg_read_server_files", "pg_write_server_files", "pg_execute_server_program", "pg_signal_backend",
]  # fmt: skip
# Run before `shadowing.begin_catalog_work` can check anything: its functions are named with their schema.
_READER_POWERS_SQL = """
SELECT r.rolsuper,
       ARRAY(SELECT g FROM pg_catalog.unnest(%(roles)s::text[]) AS g
             WHERE pg_catalog.pg_has_role(current_user, g, 'MEMBER')),
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(pg_catalog.current_schemas(false)) AND c.relkind IN ('r', 'p', 'v', 'f')
           AND pg_catalog.has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')),
       ARRAY(SELECT s FROM pg_catalog.unnest(pg_catalog.current_schemas(false)) AS s
             WHERE pg_catalog.has_schema_privilege(s, 'CREATE'))
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user
"""


async def reader_powers(connection: Connection) -> list[str]:
    """What the session's role could change, said as `is a superuser`, `may write 3 tables`...; none for a
    role made as docs/postgres.md says."""
    cursor = await connection.execute(_READER_POWERS_SQL, {"roles": _SERVER_POWER_ROLES})
    row = await cursor.fetchone()
    if row is None:
        return []
    superuser, roles, writable, creatable = row
    if superuser:
        return ["is a superuser"]
    powers = [f"is a member of {role}" for role in roles]
    if writable:
        powers.append(f"may write {writable} table{'s' if writable != 1 else ''} its search path reaches")
    if creatable:
        powers.append(f"may create objects in {', '.join(creatable)}")
    return powers


_TIME_LOADERS: dict[str, type[Loader]] = {
    "date": datetime_types.DateLoader,
    "time": datetime_types.TimeLoader,
    "timetz": datetime_types.TimetzLoader,
    "timestamp": datetime_types.TimestampLoader,
    "timestamptz": datetime_types.TimestamptzLoader,
    "interval": datetime_types.IntervalLoader,
}


def _text_when_out_of_range(base: type[Loader]) -> type[Loader]:
    class TextWhenOutOfRange(base):  # type: ignore[valid-type,misc]
        def load(self, data: Buffer) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError:
                return bytes(data).decode()

    return TextWhenOutOfRange


def may_have_ended(connection: psycopg.Connection[Any] | AsyncConnection[Any]) -> bool:
    """Whether an idle session may have ended: its socket has something to read, where an idle session's has
    nothing until it sends a query. A server that ends a session says goodbye (an error, then the end of the
    stream), so this notices a restart or `pg_terminate_backend` without a round trip; a session cut off without a
    word (a network failure) fails its next call instead."""
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (psycopg.OperationalError, OSError, ValueError):  # closed already
        return True
    return bool(readable)


async def _check_if_hung_up(connection: Connection) -> None:
    """The pool's check: the usual empty query, only for a session that may have ended (`may_have_ended`)."""
    if may_have_ended(connection):
        await AsyncConnectionPool.check_connection(connection)


def _pool(
    dsn: str, size: int, name: str, settings: Mapping[str, str], *, reader: bool
) -> AsyncConnectionPool[Connection]:
    async def apply_settings(connection: Connection) -> None:
        for setting, value in settings.items():
            await connection.execute("SELECT pg_catalog.set_config(%s, %s, false)", (setting, value))

    async def configure(connection: Connection) -> None:
        """JSON comes back as the server's own text, not as Python objects, and so do dates and times Python
        cannot hold (`infinity`, BC, past 9999); readers only read."""
        for type_name in ("json", "jsonb"):
            connection.adapters.register_loader(type_name, TextLoader)
        for type_name, loader in _TIME_LOADERS.items():
            connection.adapters.register_loader(type_name, _text_when_out_of_range(loader))
        await apply_settings(connection)
        if reader:
            await connection.execute("SET default_transaction_read_only = on")
            await connection.set_read_only(True)

    async def reset(connection: Connection) -> None:
        if reader:
            # The one thing a rolled-back read-only transaction can leave behind (its settings roll back).
            await connection.execute("SELECT pg_advisory_unlock_all()")
        else:
            # Forget everything an approved statement did to the session: settings, role, locks, listeners...
            await connection.execute("DISCARD ALL")
            await apply_settings(connection)

    return AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=max(1, size),
        open=False,
        name=name,
        timeout=CONNECT_SECONDS,
        kwargs={"autocommit": True, "prepare_threshold": None, "connect_timeout": int(CONNECT_SECONDS)},
        configure=configure,
        reset=reset,
        # A pooled session may have ended while idle (the server restarted, an administrator ended it): checked
        # when it is handed out, and replaced, rather than failing the call that gets it.
        check=_check_if_hung_up,
    )


class Pools:
    """The reader and writer pools of one database, opened on first use."""

    def __init__(self, reader_dsn: str, writer_dsn: str, *, readers: int, writers: int) -> None:
        self._dsns = (reader_dsn, writer_dsn)
        self._sizes = (readers, writers)
        self._pools: tuple[AsyncConnectionPool[Connection], AsyncConnectionPool[Connection]] | None = None
        self._lock: asyncio.Lock | None = None

    async def _ensure_open(self) -> tuple[AsyncConnectionPool[Connection], AsyncConnectionPool[Connection]]:
        if self._pools is not None:
            return self._pools
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._pools is not None:
                return self._pools
            (reader_dsn, writer_dsn), (readers, writers) = self._dsns, self._sizes
            try:
                search_path = await _reader_search_path(reader_dsn)
            except psycopg.Error as exc:
                raise DatabaseOpenError(f"Cannot connect to PostgreSQL: {error_reason(exc, *self._dsns)}") from exc
            settings = {**_STRING_SETTINGS, "search_path": search_path}
            pools = (
                _pool(reader_dsn, readers, "safedb-readers", settings, reader=True),
                _pool(writer_dsn, writers, "safedb-writers", settings, reader=False),
            )
            try:
                for pool in pools:
                    await pool.open(wait=True, timeout=CONNECT_SECONDS)
                async with pools[1].connection() as writer:
                    writers_path = await _effective_search_path(writer)
            except (PoolTimeout, psycopg.Error) as exc:
                for pool in pools:
                    await pool.close()
                raise DatabaseOpenError(f"Cannot connect to PostgreSQL: {error_reason(exc, *self._dsns)}") from exc
            if writers_path != search_path:
                for pool in pools:
                    await pool.close()
                raise DatabaseOpenError(
                    f"The writer role cannot use every schema the reader's search path reaches ({search_path}; "
                    f"the writer reaches {writers_path or 'none'}), so a name could mean another table to each. "
                    "Grant the writer USAGE on those schemas."
                )
            self._pools = pools
            return pools

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Connection]:
        reader, _ = await self._ensure_open()
        try:
            async with reader.connection() as connection, _closed_after_a_large_message(connection):
                yield connection
        except PoolTimeout as exc:
            raise QueryFailed("No read-only database connection became free in time; try again.") from exc

    @asynccontextmanager
    async def writer(self) -> AsyncIterator[Connection]:
        _, writer = await self._ensure_open()
        try:
            async with writer.connection() as connection, _closed_after_a_large_message(connection):
                yield connection
        except PoolTimeout as exc:
            raise QueryFailed("No writer database connection became free in time; try again.") from exc

    async def close(self) -> None:
        pools, self._pools = self._pools, None
        for pool in pools or ():
            await pool.close()


@asynccontextmanager
async def _closed_after_a_large_message(connection: Connection) -> AsyncIterator[None]:
    """Close the session when the work on it fails with a large server message, so that the pool replaces it.
    PostgreSQL quotes values in messages whole (`SELECT repeat('x', 400000000)::int`), and libpq keeps the
    buffers it grew to receive one for as long as the session lasts: some 800 MB for that one message, held
    by each pooled session that ever received such a message, until the server stopped."""
    try:
        yield
    except Exception as exc:
        if any(isinstance(error, psycopg.Error) and len(str(error)) > LARGE_MESSAGE_CHARS for error in _chain(exc)):
            await connection.close()
        raise


LARGE_MESSAGE_CHARS = 1024 * 1024
"""A server message longer than this closes the session it came on (see `_closed_after_a_large_message`)."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:  # a chain can loop back on itself
        seen.append(current)
        yield current
        current = current.__cause__ or current.__context__


MAX_MESSAGE_CHARS = 2000
"""How much of a server's message SafeDB passes on. PostgreSQL quotes values in messages whole
(`SELECT repeat('x', 100000000)::int`), and the message goes back to the client and into the audit log."""


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text`, cut to `limit` characters (saying how many were left out) when longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters left out)"


def server_message(exc: psycopg.Error) -> str:
    """The server's primary message for `exc` (or the first line of its text), bounded."""
    return bounded(exc.diag.message_primary or (str(exc).splitlines() or [type(exc).__name__])[0])


def _message(exc: psycopg.Error) -> str:
    primary = server_message(exc)
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
