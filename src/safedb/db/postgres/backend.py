"""`PostgresDatabase`: the `Database` protocol over PostgreSQL with psycopg 3 (async) and two pools.

- classify: PostgreSQL's own parser (pglast) walks the statement; the functions, operators and views it
  names are looked up in one catalog query on a read-only connection (`pg_proc.provolatile`).
- read: a `READ ONLY` transaction on the reader pool with `statement_timeout`, rows through a server-side
  cursor fetched in batches until the row and byte caps, behind a size guard that PostgreSQL applies.
- write: an approved statement on the writer pool, in a transaction that rolls back on error (or on its
  own, for statements PostgreSQL runs only outside a transaction block), with `statement_timeout`.
- preview: a dry run rolled back, or object sizes (`safedb.db.postgres.impact`).

Statements are always sent with the extended query protocol (a server-side cursor, or pipeline mode),
which carries exactly one statement: a second one is a server-side error, never a second statement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import anyio
import psycopg

from safedb.db.backend import UNBOUND, Bounds, Impact, QueryLimits, ResultSet, TableDescription, TableInfo, WriteOutcome
from safedb.db.postgres import catalog, function_bodies, views
from safedb.db.postgres.approved_run import changes_rows, check_data_change_names, check_unchanged
from safedb.db.postgres.connections import (
    CLIENT_GRACE_SECONDS,
    Connection,
    Pools,
    describe_dsn,
    read_transaction,
    set_statement_timeout,
    translated_errors,
)
from safedb.db.postgres.counting import count_is_a_read
from safedb.db.postgres.fired_code import TABLE_EVENT_KINDS, check_fired_unchanged, fired_code
from safedb.db.postgres.impact import (
    cascade_lines,
    cascades_reported,
    measure_impact,
    quoted_relations,
    quoted_tables,
    stored_code_calls,
)
from safedb.db.postgres.results import fetch_guarded, fetch_row_by_row, run_counted, size_guarded, streamed
from safedb.db.postgres.row_changes import check_row_changes, row_counts
from safedb.db.postgres.shadowing import begin_catalog_work
from safedb.errors import ChangedSinceQuestion, QueryFailed, QueryTimeout, RowCountChanged
from safedb.inline_work import INLINE_STATEMENT_CHARS, LONG_STATEMENT_CHARS
from safedb.sql.classification import ChangeKind, Classification
from safedb.sql.postgres_classifier import PostgresStatement, analyze_statement

logger = logging.getLogger(__name__)

_CURSOR_NAME = "safedb_read"
# Changes that run code created in the database (`Classification.code_version`); what triggers, rules and stored
# code run is in `Classification.runs` and `Classification.stored_code`.
_CODE_KINDS = frozenset({ChangeKind.FUNCTION_CALL, ChangeKind.CALL, ChangeKind.DO})


class _TooWideToGuard(Exception):
    """The statement returns PostgreSQL's most columns (1,664): the size guard's own column is one too many."""


class PostgresDatabase:
    """One PostgreSQL database: a pool of read-only connections and a pool of writer connections.

    `reader_dsn` should log in as a role that can only read (see docs/postgres.md); `writer_dsn` as the
    role approved statements run as. With one DSN for both, every guard still holds except the role's.
    The pools open on first use, in the event loop that uses them; call `aclose()` in that same loop.
    """

    def __init__(
        self,
        reader_dsn: str,
        limits: QueryLimits,
        *,
        writer_dsn: str | None = None,
        readers: int = 4,
        writers: int = 2,
        label: str | None = None,
    ) -> None:
        self.limits = limits
        self._pools = Pools(reader_dsn, writer_dsn or reader_dsn, readers=readers, writers=writers)
        self._label = label or f"postgresql {describe_dsn(writer_dsn or reader_dsn)}"
        self._long_analyses: anyio.CapacityLimiter | None = None

    @property
    def label(self) -> str:
        return self._label

    async def _analyzed(self, sql: str) -> PostgresStatement:
        """`analyze_statement(sql)`, off the event loop when the statement is long: analysing one of 1,000,000
        characters takes seconds of Python (parsing it, walking its tree), and four such reads at once held up
        every other call of the server, other sessions' reads and approvals alike, for 16 s. The longest run one
        at a time (see `LONG_STATEMENT_CHARS`), since each holds the tree of a whole statement."""
        if len(sql) <= INLINE_STATEMENT_CHARS:
            return analyze_statement(sql)
        limiter = None  # anyio's default: shared by all worker threads
        if len(sql) > LONG_STATEMENT_CHARS:
            if self._long_analyses is None:  # made here: an anyio limiter needs the running event loop
                self._long_analyses = anyio.CapacityLimiter(1)
            limiter = self._long_analyses
        with _client_deadline(self.limits.statement_timeout):
            return await anyio.to_thread.run_sync(analyze_statement, sql, limiter=limiter)

    async def classify(self, sql: str) -> Classification:
        statement = await self._analyzed(sql)
        tables = quoted_tables(statement.classification)
        looked_up = statement.functions or statement.operators or statement.relations or statement.types or tables
        if not looked_up and statement.classification.read_only:
            return statement.classification
        seconds = self.limits.statement_timeout
        with _client_deadline(seconds):
            async with self._pools.reader() as connection, translated_errors(seconds), read_transaction(connection):
                await begin_catalog_work(connection, seconds)
                await catalog.for_catalog_queries(connection)
                calls = await function_bodies.calls_with_effects(connection, statement)
                # A change of a view is made in the relations beneath it: the question names them as changed too.
                through = (await views.through_views(connection, statement.classification)).through
                changes = [*calls, *(link.change for link in through)]
                classification = replace(statement.with_changes(changes), through_views=through)
                # The sequences its calls move too (`setval('s', 1)`).
                meant = await catalog.resolved(connection, quoted_relations(classification))
                runs = await fired_code(connection, classification) if not classification.read_only else ()
                stored, user_code = (
                    await stored_code_calls(connection, classification) if changes_rows(classification) else ((), False)
                )
                cascades = await cascade_lines(connection, classification)
                runs_code = runs or stored or any(kind in _CODE_KINDS for kind in classification.kinds)
                version = await catalog.code_version(connection) if runs_code else None
        return replace(
            classification,
            resolved=meant,
            runs=runs,
            stored_code=stored,
            cascades=cascades,
            code_version=version,
            sets_off_unjudged_code=bool(runs) or user_code,
        )

    async def read(self, classification: Classification) -> ResultSet:
        if not classification.read_only:
            raise ValueError("read() takes read-only statements only")
        statement = await self._analyzed(classification.statement)
        if not statement.classification.read_only:
            raise ValueError("read() takes read-only statements only")
        try:
            return await self._read(statement, guarded=True)
        except _TooWideToGuard:
            return await self._read(statement, guarded=False)

    async def _read(self, statement: PostgresStatement, *, guarded: bool) -> ResultSet:
        seconds = self.limits.statement_timeout
        with _client_deadline(seconds):
            async with (
                self._pools.reader() as connection,
                translated_errors(seconds, statement_errors_refuse=True),
                read_transaction(connection),
            ):
                await set_statement_timeout(connection, seconds)
                return await self._read_rows(connection, statement, guarded)

    async def _read_rows(self, connection: Connection, statement: PostgresStatement, guarded: bool) -> ResultSet:
        if statement.cursor_read and guarded:
            async with connection.cursor(name=_CURSOR_NAME) as server_cursor:
                try:
                    await server_cursor.execute(size_guarded(self._row_limited(statement), self.limits))
                except psycopg.errors.TooManyColumns as exc:
                    raise _TooWideToGuard from exc
                columns = [column.name for column in server_cursor.description or ()][:-1]
                return await fetch_guarded(server_cursor, columns, self.limits)
        if statement.cursor_read:
            async with connection.cursor(name=_CURSOR_NAME) as server_cursor:
                await server_cursor.execute(self._row_limited(statement))
                columns = [column.name for column in server_cursor.description or ()]
                return await fetch_row_by_row(server_cursor, columns, self.limits)
        # SHOW and EXPLAIN: streamed (extended protocol) and read to the end.
        _, result = await streamed(connection.cursor(), statement.text, self.limits)
        return result

    def _row_limited(self, statement: PostgresStatement) -> str:
        """The text of a cursor read, with a LIMIT one row past the row cap where it has none: PostgreSQL then
        makes no more rows than SafeDB keeps (a sort keeps the first ones in memory, a top-N heapsort, where
        sorting a large table whole spills to temporary files). The statement classified is the one written.

        The LIMIT is a subquery, which the planner cannot read: it plans as for the cursor without one (for its
        first tenth), not for a few rows, a hint that can pick an index scan through a whole table for a rare
        match. The executor still hands the limit to the sort."""
        if not statement.takes_row_limit:
            return statement.text
        # On a line of its own: the statement may end in a `--` comment.
        return f"{statement.text}\nLIMIT (SELECT {int(self.limits.rows_to_read)})"

    async def preview(self, classification: Classification) -> Impact:
        statement = await self._analyzed(classification.statement)
        return await measure_impact(self._pools, statement, classification, self.limits)

    async def write(
        self,
        approved: Classification,
        bounds: Bounds = UNBOUND,
    ) -> WriteOutcome:
        statement = await self._analyzed(approved.statement)
        seconds = self.limits.statement_timeout
        if statement.in_transaction:
            with _client_deadline(seconds):
                # The transaction rolls back when `_run` raises.
                async with self._pools.writer() as connection, translated_errors(seconds), connection.transaction():
                    await begin_catalog_work(connection, seconds)
                    await check_unchanged(connection, statement, approved, bounds.rows)
                    counted_before = None if bounds.row_changes is None else await row_counts(connection)
                    with cascades_reported(connection) as dropped:
                        if bounds.drops is not None:
                            await connection.execute("SET LOCAL client_min_messages = notice")
                        outcome = await self._run(connection, statement, bounds.rows)
                    if counted_before is not None and bounds.row_changes is not None:
                        await check_row_changes(connection, counted_before, bounds.row_changes)
                    # Objects made since the question that depend on what it drops: dropped unseen; roll back.
                    if bounds.drops is not None and (unseen := [d for d in dropped if d not in bounds.drops]):
                        raise ChangedSinceQuestion(f"it would now also drop {'; '.join(unseen)}")
                    await check_data_change_names(connection, approved)
                    if approved.kinds and set(approved.kinds) <= TABLE_EVENT_KINDS:
                        # A trigger of a table the statement reached but did not lock beforehand (one a foreign
                        # key's action changed) may have been added since the check: it ran; roll back.
                        await check_fired_unchanged(connection, approved)
                    return outcome
        try:
            with _client_deadline(seconds):
                async with self._pools.writer() as connection, translated_errors(seconds):
                    await begin_catalog_work(connection, seconds, local=False)
                    await check_unchanged(connection, statement, approved, None)
                    return await self._run(connection, statement, None)
        except ChangedSinceQuestion:
            raise  # stopped before it ran
        except QueryFailed as exc:
            raise QueryFailed(f"{exc} {_NOT_ROLLED_BACK}") from exc

    async def _run(
        self, connection: Connection, statement: PostgresStatement, approved_rows: int | None
    ) -> WriteOutcome:
        count, returned = await run_counted(connection, statement, self.limits)
        # Counted as the dry run counts (`impact._data_impact`); data changes always run in a transaction.
        if approved_rows is not None and (affected := max(count, 0)) != approved_rows:
            raise RowCountChanged(approved_rows, affected)
        rows = count if count >= 0 and _counts_rows(statement) else None
        return WriteOutcome(rows_affected=rows, returned=returned)

    async def list_tables(self) -> list[TableInfo]:
        seconds = self.limits.statement_timeout
        with _client_deadline(seconds):
            async with self._pools.reader() as connection, translated_errors(seconds), read_transaction(connection):
                await begin_catalog_work(connection, seconds)
                return [TableInfo(r.display_name, r.type) for r in await catalog.relations(connection)]

    async def describe_table(self, name: str) -> TableDescription | None:
        seconds = self.limits.statement_timeout
        with _client_deadline(seconds):
            async with self._pools.reader() as connection, translated_errors(seconds), read_transaction(connection):
                await begin_catalog_work(connection, seconds)
                found = [
                    r for r in await catalog.relations(connection) if name in (r.display_name, f"{r.schema}.{r.name}")
                ]
                if not found:
                    return None
                relation = found[0]
                # Counting plans the table and runs its policies: only where that is a read (`counting`), and
                # within half the time limit (the rest is for the other lookups). Else the planner's estimate.
                await catalog.for_catalog_queries(connection)
                rows = None
                if await count_is_a_read(connection, relation.identifier().as_string(connection)):
                    rows = await catalog.row_count(connection, relation, seconds / 2)
                estimate = await catalog.row_estimate(connection, relation) if rows is None else None
                return TableDescription(
                    name=relation.display_name,
                    type=relation.type,
                    columns=await catalog.columns(connection, relation),
                    row_count=rows if estimate is None else estimate,
                    sql=await catalog.definition(connection, relation),
                    row_count_estimated=estimate is not None,
                )

    async def aclose(self) -> None:
        await self._pools.close()


_NOT_ROLLED_BACK = (
    "PostgreSQL runs this statement outside a transaction block, so there was no rollback: part of its work "
    "may remain (a failed CREATE INDEX CONCURRENTLY leaves an invalid index behind, which DROP INDEX removes)."
)


@contextmanager
def _client_deadline(seconds: float) -> Iterator[None]:
    """A client-side bound a little past the server's statement timeout, for a server that stops answering."""
    try:
        with anyio.fail_after(seconds + CLIENT_GRACE_SECONDS):
            yield
    except TimeoutError as exc:
        raise QueryTimeout(seconds) from exc


_ROW_COUNTING = frozenset({"InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt", "SelectStmt", "CreateTableAsStmt"})


def _counts_rows(statement: PostgresStatement) -> bool:
    return statement.root in _ROW_COUNTING
