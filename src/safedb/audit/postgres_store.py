"""`PostgresAuditStore`: the audit log as tables in a dedicated PostgreSQL schema, for several processes at once.

The store has a connection of its own (autocommit between appends), apart from any data connection, so
a rolled-back data change never takes its record with it. Each append takes the schema's advisory lock
first, then reads the last record and the head anchor, inserts the new record, moves the anchor and
commits: appends from any number of processes (and hosts) queue on that lock, so sequence numbers rise
by one with no gaps and every record chains from the one before it. Record times come from the database
server's clock, so replicas on several hosts still write them in order.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import IsolationLevel, sql

from safedb.audit.chain import GENESIS_HASH
from safedb.audit.errors import AuditWriteFailed
from safedb.audit.events import AuditEvent
from safedb.audit.open import DEFAULT_SCHEMA
from safedb.audit.postgres_schema import (
    Connection,
    check_schema,
    checked_schema_name,
    ensure_schema,
    lock_key,
    names,
)
from safedb.audit.records import AuditRecord, format_time
from safedb.audit.rows import (
    COLUMNS,
    SELECT_COLUMNS,
    entry_from_row,
    hash_text,
    query_filters,
    record_from_row,
    stored_values,
)
from safedb.audit.store import AnswerCheck, AuditQuery, ChainHead, ChainSnapshot
from safedb.audit.threaded import ThreadedAuditStore
from safedb.db.postgres.connections import describe_dsn, error_reason, may_have_ended
from safedb.errors import DatabaseOpenError

logger = logging.getLogger(__name__)

CONNECT_SECONDS = 10
_FETCH_ROWS = 500


class PostgresAuditStore(ThreadedAuditStore[Connection]):
    """The audit log in a PostgreSQL schema. Open with `PostgresAuditStore.open(url)`; close when done."""

    def __init__(self, dsn: str, schema: str, writer: Connection | None, busy_timeout: float) -> None:
        self._dsn = dsn
        self.schema = schema
        self.where = describe_dsn(dsn)
        """`user@host:port/dbname`: the server, never the password."""
        super().__init__(writer)
        self._busy_timeout = busy_timeout
        self._sql = _Statements(schema)

    @property
    def label(self) -> str:
        return f"postgresql {self.where}, schema {self.schema}"

    @classmethod
    def open(
        cls, url: str, *, schema: str = DEFAULT_SCHEMA, readonly: bool = False, busy_timeout: float = 30.0
    ) -> PostgresAuditStore:
        """Connect to the database at `url` and use the audit log in `schema`, creating it unless `readonly`.

        `busy_timeout` bounds (in seconds) every wait for the append lock and every statement. Raises
        DatabaseOpenError when the server cannot be reached, the schema holds something other than an audit
        log, or (readonly) there is no audit log.
        """
        try:
            checked_schema_name(schema)
        except ValueError as exc:
            raise DatabaseOpenError(str(exc)) from None
        connection = _connect(url, readonly=readonly, busy_timeout=busy_timeout)
        where = describe_dsn(url)
        try:
            if readonly:
                check_schema(connection, schema, where)
            else:
                ensure_schema(connection, schema, where)
        except psycopg.Error as exc:
            connection.close()
            reason = error_reason(exc, url)
            raise DatabaseOpenError(f"Cannot open the audit log {schema} in {where}: {reason}") from None
        except BaseException:
            connection.close()
            raise
        if readonly:
            connection.close()
            return cls(url, schema, None, busy_timeout)
        return cls(url, schema, connection, busy_timeout)

    def _write(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        """`append` under the store lock (see `ThreadedAuditStore.append`). A connection that ended while idle is
        reopened first; one lost during the append fails it and is reopened for the next."""
        with self._lock:
            if self._writer is None:
                raise AuditWriteFailed(f"The audit log {self.schema} in {self.where} is not open for writing.")
            try:
                if self._writer.closed or self._writer.broken or not _alive(self._writer):
                    self._writer.close()
                    self._writer = _connect(self._dsn, readonly=False, busy_timeout=self._busy_timeout)
                return self._append(self._writer, _nul_free(event), check)
            except (psycopg.Error, DatabaseOpenError) as exc:
                reason = error_reason(exc, self._dsn) if isinstance(exc, psycopg.Error) else str(exc)
                logger.error("Cannot append to the audit log %s in %s: %s", self.schema, self.where, reason)
                raise AuditWriteFailed(f"The audit log could not be written ({reason}).") from exc

    def _append(self, writer: Connection, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        with writer.transaction():
            writer.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema),))
            if check is not None:
                state = writer.execute(self._sql.answer_state, (event.target, event.sql, event.request_id)).fetchone()
                assert state is not None
                if not check.passes(*state):
                    return None
            state = writer.execute(self._sql.state).fetchone()
            assert state is not None
            last_seq, last_hash, head_seq, head_hash, now = state
            last_seq, last_hash = (last_seq, last_hash) if last_seq is not None else (0, GENESIS_HASH)
            if head_seq is None or (head_seq, head_hash) != (last_seq, last_hash):
                logger.warning(
                    "The audit log %s in %s does not end where its head anchor says (records were removed or "
                    "added outside SafeDB); appending after it. Run `safedb audit verify`.", self.schema, self.where,
                )  # fmt: skip
            record = AuditRecord.chained(
                event, seq=max(last_seq, head_seq or 0) + 1, time=format_time(now), prev_hash=last_hash
            )
            writer.execute(self._sql.insert, stored_values(record))
            writer.execute(self._sql.move_head, (record.seq, record.hash))
        return record

    def records(self, query: AuditQuery) -> Iterator[AuditRecord]:
        """The records matching `query`, oldest first, streamed through a connection of their own."""
        where, parameters = query_filters(query, "%s")
        statement = f"SELECT {SELECT_COLUMNS} FROM {self._sql.log} {where} ORDER BY seq"
        if query.limit is not None:
            statement = f"SELECT * FROM ({statement} DESC LIMIT %s) AS recent ORDER BY seq"
            parameters.append(query.limit)
        with self._reader(IsolationLevel.READ_COMMITTED) as reader:
            for row in self._rows(reader, statement, parameters):
                yield record_from_row(row)

    @contextmanager
    def snapshot(self) -> Iterator[ChainSnapshot]:
        """The head anchor and all records, read in one REPEATABLE READ transaction (later appends unseen)."""
        with self._reader(IsolationLevel.REPEATABLE_READ) as reader:
            head = self._head(reader)
            rows = self._rows(reader, f"SELECT {SELECT_COLUMNS} FROM {self._sql.log} ORDER BY seq", [])
            yield ChainSnapshot(head=head, entries=(entry_from_row(row) for row in rows))

    @staticmethod
    def _rows(reader: Connection, statement: str, parameters: list[Any]) -> Iterator[tuple[Any, ...]]:
        """Rows streamed through a server-side cursor (the reader is in a transaction)."""
        with reader.cursor(name="safedb_audit_rows") as cursor:
            cursor.itersize = _FETCH_ROWS
            cursor.execute(statement, parameters)
            yield from cursor

    def _head(self, reader: Connection) -> ChainHead | None:
        """The head anchor; None when it is gone (its table dropped or its row deleted) or is not a number."""
        try:
            with reader.transaction():
                row = reader.execute(self._sql.head).fetchone()
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
            return None
        if row is None or not isinstance(row[0], int):
            return None
        return ChainHead(seq=row[0], hash=hash_text(row[1]))

    @contextmanager
    def _reader(self, isolation: IsolationLevel) -> Iterator[Connection]:
        """A read-only connection in one transaction, to a schema checked to be an audit log."""
        connection = _connect(self._dsn, readonly=True, busy_timeout=self._busy_timeout)
        try:
            check_schema(connection, self.schema, self.where)
            connection.isolation_level = isolation
            with connection.transaction():
                yield connection
        except psycopg.Error as exc:
            raise DatabaseOpenError(
                f"Cannot read the audit log {self.schema} in {self.where}: {error_reason(exc, self._dsn)}"
            ) from None
        finally:
            connection.close()


class _Statements:
    """The statements of one schema's store, as text (the schema name is checked, and quoted)."""

    def __init__(self, schema: str) -> None:
        quoted = names(schema)
        self.log = log = sql.SQL("{log}").format(**quoted).as_string()
        head = sql.SQL("{head}").format(**quoted).as_string()
        self.head = f"SELECT seq, hash FROM {head} WHERE id = 1"
        # Whether the request has an answer already, and whether the log holds its question.
        self.answer_state = (
            "SELECT coalesce(bool_or(decision <> 'requested'), false), "
            "coalesce(bool_or(decision = 'requested' AND target = %s AND sql = %s), false) "
            f"FROM {log} WHERE request_id = %s"
        )
        last = f"FROM {log} ORDER BY seq DESC LIMIT 1"
        self.state = (
            f"SELECT (SELECT seq {last}), (SELECT hash {last}), (SELECT seq FROM {head} WHERE id = 1), "
            f"(SELECT hash FROM {head} WHERE id = 1), clock_timestamp()"
        )
        self.insert = f"INSERT INTO {log} ({SELECT_COLUMNS}) VALUES ({', '.join('%s' for _ in COLUMNS)})"
        self.move_head = (
            f"INSERT INTO {head} (id, seq, hash) VALUES (1, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash"
        )


def _connect(dsn: str, *, readonly: bool, busy_timeout: float) -> Connection:
    """An autocommit connection whose transactions are READ COMMITTED (read only when `readonly`)."""
    try:
        connection = psycopg.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_SECONDS, application_name="safedb-audit",
            prepare_threshold=None,
        )  # fmt: skip
    except psycopg.Error as exc:
        raise DatabaseOpenError(
            f"Cannot connect to the PostgreSQL audit log at {describe_dsn(dsn)}: {error_reason(exc, dsn)}"
        ) from None
    try:
        connection.isolation_level = IsolationLevel.READ_COMMITTED
        connection.read_only = True if readonly else None
        milliseconds = f"{max(1, round(busy_timeout * 1000))}ms"
        connection.execute("SELECT set_config('statement_timeout', %s, false)", (milliseconds,))
        connection.execute("SELECT set_config('lock_timeout', %s, false)", (milliseconds,))
        encoding = connection.execute("SHOW server_encoding").fetchone()
        if encoding is None or encoding[0] != "UTF8":
            raise DatabaseOpenError(
                f"The audit log needs a database with UTF8 encoding; {describe_dsn(dsn)} uses "
                f"{encoding[0] if encoding else 'an unknown encoding'}."
            )
    except psycopg.Error as exc:
        connection.close()
        raise DatabaseOpenError(
            f"Cannot use the PostgreSQL audit log at {describe_dsn(dsn)}: {error_reason(exc, dsn)}"
        ) from None
    except BaseException:
        connection.close()
        raise
    return connection


def _nul_free(event: AuditEvent) -> AuditEvent:
    """PostgreSQL text cannot hold NUL characters: they are kept as the escape `\\x00`."""

    def text(value: str) -> str:
        return value.replace("\x00", "\\x00")

    def optional(value: str | None) -> str | None:
        return None if value is None else text(value)

    return dataclasses.replace(
        event,
        request_id=text(event.request_id),
        target=text(event.target),
        sql=text(event.sql),
        caller=optional(event.caller),
        classification=text(event.classification),
        changes=tuple(text(change) for change in event.changes),
        justification=optional(event.justification),
        environment=optional(event.environment),
        error=optional(event.error),
    )


def _alive(connection: Connection) -> bool:
    """Whether the session still answers: an idle session may have ended (the server restarted, an administrator
    ended it), and the append it would fail is one whose decision must not be lost. One empty query tells, sent
    only when the session may have ended (`may_have_ended`)."""
    if not may_have_ended(connection):
        return True
    try:
        connection.execute("")
    except psycopg.OperationalError:
        return False
    return True
