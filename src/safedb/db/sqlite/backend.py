"""`SqliteDatabase`: the `Database` protocol over one SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import queue
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from safedb.db.backend import (
    UNBOUND,
    Bounds,
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
from safedb.db.sqlite.expansion import COPY_LIMIT, copied_tokens, statement_nesting, subquery_depth, tables_joined
from safedb.db.sqlite.impact import may_replace, measure_impact, rows_changed
from safedb.db.sqlite.inspector import (
    SchemaFacts,
    inspect_statement,
    module_storage_names,
    resolved_names,
    schema_facts,
    schema_version,
)
from safedb.db.sqlite.known_statements import KnownStatements
from safedb.db.sqlite.row_limit import execute_read
from safedb.errors import ChangedSinceQuestion, InvalidStatement, QueryFailed, QueryTimeout, RowCountChanged
from safedb.inline_work import INLINE_BUDGET, INLINE_STATEMENT_CHARS, LONG_STATEMENT_CHARS, RecentDuration
from safedb.memory import release_memory
from safedb.sql.classification import (
    MAX_STATEMENT_CHARS,
    ChangeCategory,
    ChangeKind,
    Classification,
    ObjectType,
    names_moved,
)
from safedb.sql.policy import file_path
from safedb.sql.sqlite_actions import (
    Action,
    AuthorizerEvent,
    calls_only_bounded_functions,
    is_read_event,
    is_schema_table,
    is_shadow_bookkeeping,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

ABANDON_GRACE = 0.25
"""Seconds past its interrupt that a call waits for work in a worker thread to stop (see `_in_thread`)."""

# The schema name SQLite gives the copy it builds while running VACUUM.
VACUUM_SCHEMA = "vacuum_db"

# Statements SQLite will not run inside a transaction, or that take effect outside it.
_OUTSIDE_TRANSACTION = frozenset({ChangeKind.VACUUM, ChangeKind.ATTACH, ChangeKind.DETACH, ChangeKind.PRAGMA})

# Statements that may change how the connection they run on behaves (a pragma's setting, a database attached),
# which no other connection sees, and pragmas that only change the file, which every connection sees.
_SETTING_CONNECTION = frozenset({ChangeKind.ATTACH, ChangeKind.DETACH, ChangeKind.PRAGMA})
_FILE_PRAGMAS = frozenset({"user_version", "application_id", "schema_version", "wal_checkpoint", "incremental_vacuum"})

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

    Nothing, not even a read, is allowed inside a trigger, view or WITH query the question did not see: a trigger
    added since may write nothing and still change what the statement does (`RAISE(IGNORE)` skips a row).
    """
    allowed = approved.engine_view
    seen_code = frozenset(event.source for event in allowed if isinstance(event, AuthorizerEvent) and event.source)
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
        if source is not None and source not in seen_code:
            return sqlite3.SQLITE_DENY
        # SQLite reports schema (re)loading as updates of its own catalog; they change nothing.
        schema_load = code == Action.UPDATE and is_schema_table(arg1) and source is None
        vacuum_step = bool(vacuum_files) and (
            schema == VACUUM_SCHEMA or code == Action.TRANSACTION or (code == Action.ATTACH and arg1 in vacuum_files)
        )
        module_step = is_shadow_bookkeeping(event, shadow_tables) or (
            source is None
            and bool(new_virtual_tables)
            and (
                (arg1 or "").startswith(new_virtual_tables)
                or (arg2 or "").startswith(new_virtual_tables)
                or is_schema_table(arg1)  # recording the shadow tables
            )
        )
        pragma_step = code == Action.PRAGMA and (arg1 or "").lower() in pragmas
        permitted = event in allowed or is_read_event(event) or schema_load or vacuum_step or module_step or pragma_step
        return sqlite3.SQLITE_OK if permitted else sqlite3.SQLITE_DENY

    return authorize


class SqliteDatabase:
    """One SQLite file: a small pool of read-only readers and as many inspectors (read-only connections
    that classify statements, kept apart so that the readers keep their prepared statements), and one writer,
    used from worker threads; one more of each for short work on the event loop's thread (`INLINE_BUDGET`),
    which never wait for a lock; and one more of each for the longest statements (`LONG_STATEMENT_CHARS`).

    Work on statements of up to `INLINE_STATEMENT_CHARS` runs on the event loop's thread first when it is short:
    reads, dry runs and classifications that finish within the budget, and approved changes while changes have
    lately been quick (a commit waits for the disk). Work stopped there (past the budget, or by a lock) has changed
    nothing and runs again in a worker thread: reads change nothing, and dry runs and changes run inside
    a transaction that is rolled back when they are stopped. Changes that take effect outside a
    transaction (VACUUM, ATTACH, DETACH, pragmas) always run in a worker thread. A pragma's setting, or a database
    attached, holds on the one writer it ran on: from then on every dry run and approved change runs on that
    writer, so that a question never shows what a statement does on another connection than the one it runs on."""

    def __init__(self, path: Path, limits: QueryLimits, *, readers: int = 4, label: str | None = None) -> None:
        connections.check_database_file(path)
        self.path = path
        self.limits = limits
        self._label = label or f"sqlite {path.name}"
        self._all_readers = [connections.open_reader(path) for _ in range(readers)]
        self._all_inspectors = [connections.open_inspector(path) for _ in range(readers)]
        self._readers = _pool(self._all_readers)
        self._inspectors = _pool(self._all_inspectors)
        # The longest statements are classified, read, dry-run and run one at a time, on connections of their own.
        self._long_statement_inspector = connections.open_inspector(path)
        self._long_statement_inspectors = _pool([self._long_statement_inspector])
        self._long_statement_reader = connections.open_reader(path)
        self._long_statement_readers = _pool([self._long_statement_reader])
        self._long_statement_writer = connections.open_writer(path)
        self._inline_reader = connections.open_reader(path, on_event_loop=True)
        self._inline_inspector = connections.open_inspector(path, on_event_loop=True)
        self._writer = connections.open_writer(path)
        self._inline_writer = connections.open_writer(path, on_event_loop=True)
        # The writer an approved change may have set a pragma or attached a database on: from then on every dry run
        # and approved change runs there, so that what a question shows is what runs (see `_sets_connection`).
        self._set_writer: GuardedConnection | None = None
        self._recent_writes = RecentDuration()
        self._known_statements = KnownStatements()
        self._schema: tuple[int, SchemaFacts] = (-1, SchemaFacts())

    @property
    def label(self) -> str:
        return self._label

    async def _in_thread(self, work: Callable[[], T], interrupt_after: float | None) -> T:
        """Run blocking database work in a worker thread. If the call is cancelled, or `interrupt_after`
        seconds pass, interrupt SQLite so the connection is freed at once (an interrupted write rolls back).

        The work's own time limit is checked between steps of SQLite's program; one long step (a single
        call that builds a large value, or compares two large ones) runs past it, which `interrupt_after`
        bounds: SQLite stops at the end of that step. Should the step outlast the interrupt by
        `ABANDON_GRACE` seconds, the call ends with QueryTimeout all the same, and the thread finishes
        (and rolls back) on its own, holding its connection until then. Approved statements pass None: an
        interrupt must not land on their COMMIT, nor may the call end before they do.
        """
        held: list[GuardedConnection] = []
        token = connections.HELD_CONNECTIONS.set(held)
        call = connections.CallTime(math.inf if interrupt_after is None else time.monotonic() + interrupt_after)
        call_token = connections.CALL_TIME.set(call)
        timer = None
        if interrupt_after is not None:
            timer = asyncio.get_running_loop().call_later(interrupt_after, _interrupt, held)
        deadline = math.inf if interrupt_after is None else interrupt_after + ABANDON_GRACE
        try:
            with anyio.move_on_after(deadline):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            assert interrupt_after is not None  # only a finite deadline passes
            raise QueryTimeout(interrupt_after)
        except anyio.get_cancelled_exc_class():
            call.end_now()  # first: work that takes a connection from now on stops at its first step
            _interrupt(held)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if interrupt_after is not None:
                call.end_now()  # work of this call still waiting for a connection gives up when it gets one
            connections.HELD_CONNECTIONS.reset(token)
            connections.CALL_TIME.reset(call_token)

    def _inline(
        self, connection: GuardedConnection, work: Callable[[sqlite3.Connection], T], time_limit: float | None = None
    ) -> T:
        """Run short `work` on one of the event loop's own connections, within `INLINE_BUDGET` (or its own
        `time_limit`, when shorter; by default the statement time limit).

        Raises:
            QueryFailed: SQLite stopped it (QueryTimeout past the budget) or reported an error, for
                instance a lock held by another connection. `work` must then have changed nothing.
        """
        limit = self.limits.statement_timeout if time_limit is None else time_limit
        with connection.session(min(INLINE_BUDGET, limit)) as session:
            return work(session)

    async def classify(self, sql: str) -> Classification:
        if len(sql) > MAX_STATEMENT_CHARS:
            raise InvalidStatement(
                f"The statement is {len(sql):,} characters long; SafeDB takes SQLite statements of up to "
                f"{MAX_STATEMENT_CHARS:,} characters."
            )
        if len(sql) <= INLINE_STATEMENT_CHARS:
            # A writer's lock, past the budget, or deeply nested: in a worker thread.
            with contextlib.suppress(QueryFailed, _TooDeepForTheEventLoop):
                return self._inline(
                    self._inline_inspector, lambda connection: self._classify(connection, sql, on_event_loop=True)
                )

        inspectors = self._long_statement_inspectors if _is_long(sql) else self._inspectors

        def work() -> Classification:
            with _memory_released_after(sql), _session_from(inspectors, self.limits.statement_timeout) as connection:
                return self._classify(connection, sql)

        return await self._in_thread(work, self.limits.statement_timeout)

    def _classify(self, inspector: sqlite3.Connection, sql: str, *, on_event_loop: bool = False) -> Classification:
        version = schema_version(inspector)
        if (known := self._known_statements.get(sql, version)) is not None:
            return known
        if on_event_loop and _slow_to_compile(sql):
            raise _TooDeepForTheEventLoop
        schema = self._schema_at(inspector, version)
        # The views it names and the triggers it fires are compiled into it too, nesting what they nest (its own
        # nesting is `_slow_to_compile`; reading a long text again costs, so only when the schema nests anything).
        deep_through_schema = (
            bool(schema.nesting) and statement_nesting(sql, schema.nesting) > _SUBQUERY_DEPTH_ON_EVENT_LOOP
        )
        if on_event_loop and deep_through_schema:
            raise _TooDeepForTheEventLoop
        classification = inspect_statement(inspector, sql, schema)
        if schema_version(inspector) == version:  # else the schema changed while compiling
            self._known_statements.add(sql, version, classification)
            # Its read or dry run compiles it again: in a worker thread too, whose connections keep nothing compiled.
            if deep_through_schema or classification.program_length > connections.KEPT_PROGRAM_INSTRUCTIONS:
                self._known_statements.mark_long_running(sql)
        return classification

    def _schema_at(self, connection: sqlite3.Connection, version: int) -> SchemaFacts:
        known_version, facts = self._schema
        if known_version != version:
            facts = schema_facts(connection)
            self._schema = (version, facts)
        return facts

    async def read(self, classification: Classification) -> ResultSet:
        if not classification.read_only:
            raise ValueError("read() takes read-only statements only")

        def run(connection: sqlite3.Connection) -> ResultSet:
            # Closing the cursor ends the read at once, even when rows were left unread past the caps.
            with contextlib.closing(
                execute_read(connection, classification.statement, self.limits.rows_to_read)
            ) as cursor:
                columns = [column[0] for column in cursor.description or ()]
                return fetch_capped(cursor, columns, self.limits)

        if self._inline_first(classification):
            started = time.monotonic()
            try:
                return self._inline(self._inline_reader, run)
            except QueryTimeout:
                self._known_statements.mark_long_running(classification.statement)
            except QueryFailed:
                pass  # a lock, or an error that the worker thread will report
            finally:
                # A read that ended on its own far past the budget ran a step no progress handler stopped (one that
                # `inspector._LONG_STEP_OPCODES` does not know): in a worker thread from now on.
                if time.monotonic() - started > _LONG_PAST_BUDGET * INLINE_BUDGET:
                    self._known_statements.mark_long_running(classification.statement)

        statement = classification.statement
        readers = self._long_statement_readers if _is_long(statement) else self._readers

        def work() -> ResultSet:
            with _memory_released_after(statement), _session_from(readers, self.limits.statement_timeout) as connection:
                return run(connection)

        return await self._in_thread(work, self.limits.statement_timeout)

    async def preview(self, classification: Classification) -> Impact:
        def measure(connection: sqlite3.Connection) -> Impact:
            return measure_impact(
                connection, classification, lambda: approved_only(classification, module_storage_names(connection))
            )

        if self._set_writer is None and self._inline_first(classification):
            with contextlib.suppress(QueryFailed):  # a lock, or past the budget: in a worker thread
                return self._inline(self._inline_writer, measure, self.limits.preview_timeout)

        writer = self._writer_for(classification.statement)

        def work() -> Impact:
            with (
                _memory_released_after(classification.statement),
                writer.session(self.limits.preview_timeout) as connection,
            ):
                return measure(connection)

        return await self._in_thread(work, self.limits.preview_timeout)

    async def write(
        self,
        approved: Classification,
        bounds: Bounds = UNBOUND,
    ) -> WriteOutcome:
        """See `Database.write`. A DROP in SQLite takes nothing with it, so `bounds.drops` binds nothing here; nor
        does `bounds.row_changes`, which a preview of SQLite's never measures (`rows_affected` counts its triggers'
        rows too, and a change may not read the settings its dry run sets otherwise)."""

        def run(connection: sqlite3.Connection) -> WriteOutcome:
            return self._run_approved(connection, approved, bounds.rows)

        writer = self._writer_for(approved.statement)
        if _sets_connection(approved):
            self._set_writer = writer  # before it runs: it may have set something even if it fails
        elif (
            self._set_writer is None
            and _in_transaction(approved)
            and self._inline_first(approved)
            and self._recent_writes.within_budget()
        ):
            # Rolled back when it fails: a lock, past the budget, or an error the worker thread will report.
            try:
                with self._recent_writes.timing():
                    return self._inline(self._inline_writer, run)
            except RowCountChanged:
                raise
            except QueryFailed:
                pass

        def work() -> WriteOutcome:
            with (
                _memory_released_after(approved.statement),
                _new_files_kept_on_success(approved),
                writer.session(self.limits.statement_timeout) as connection,
            ):
                return run(connection)

        return await self._in_thread(work, None)

    def _inline_first(self, classification: Classification) -> bool:
        """Whether to try work on the statement on the event loop's thread first (see the class): only short texts
        run there, as the event loop's connections keep what they compile (see `connections._KEPT_STATEMENTS`)."""
        statement = classification.statement
        return (
            len(statement) <= INLINE_STATEMENT_CHARS
            and _short_steps_only(classification)
            and not self._known_statements.long_running(statement)
        )

    def _writer_for(self, statement: str) -> GuardedConnection:
        if self._set_writer is not None:
            return self._set_writer
        return self._long_statement_writer if _is_long(statement) else self._writer

    def _run_approved(
        self, connection: sqlite3.Connection, approved: Classification, approved_rows: int | None
    ) -> WriteOutcome:
        in_transaction = _in_transaction(approved)
        if in_transaction:
            connection.execute("BEGIN IMMEDIATE")
        try:
            # Within the write lock, so no one can rename a table from now until the statement has run.
            if moved := names_moved(approved, resolved_names(connection, approved)):
                raise ChangedSinceQuestion("; ".join(moved))
            # The count shown holds only where nothing may REPLACE; another connection may have changed a
            # table's definition since (ON CONFLICT REPLACE), and such deletions raise no authorizer event.
            if approved_rows is not None and may_replace(connection, approved):
                raise QueryFailed(
                    "Since the question was asked, the schema changed so that the statement may REPLACE "
                    "conflicting rows, which SQLite does not count: the approved row count cannot hold. Nothing "
                    "was changed; ask again."
                )
            total_before = connection.total_changes
            connection.set_authorizer(approved_only(approved, module_storage_names(connection)))
            cursor = connection.execute(approved.statement)
            connection.set_authorizer(None)
            # Schema changes return no rows, though SQLite may show the columns of a query it runs inside
            # one (ALTER TABLE ... ADD COLUMN ... CHECK checks the existing rows with one).
            returns_rows = not all(kind.category is ChangeCategory.SCHEMA for kind in approved.kinds)
            columns = [column[0] for column in cursor.description or ()] if returns_rows else []
            returned = fetch_capped(cursor, columns, self.limits) if columns else None
            connections.drain(cursor)  # finish the statement even when RETURNING rows were capped
            # Only data changes have a count to hold to, and they always run in a transaction.
            if approved_rows is not None and (total := rows_changed(connection, total_before)) != approved_rows:
                raise RowCountChanged(approved_rows, total)
            if in_transaction:
                connections.commit(connection)
        except BaseException as exc:
            connection.set_authorizer(None)
            connections.roll_back(connection)
            # SQLITE_AUTH: "not authorized", or "access to t.c is prohibited" for a read the authorizer refused.
            if isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_AUTH:
                raise QueryFailed(
                    "The statement now does something that was not approved (the schema may have changed "
                    "since the question was asked). Nothing was changed; ask again."
                ) from exc
            raise
        rows = cursor.rowcount if cursor.rowcount >= 0 else None
        return WriteOutcome(rows_affected=rows, returned=returned)

    async def list_tables(self) -> list[TableInfo]:
        def work() -> list[TableInfo]:
            with _session_from(self._readers, self.limits.statement_timeout) as connection:
                return [
                    TableInfo(name, _object_type(kind, sql)) for name, kind, sql in connection.execute(_CATALOG_SQL)
                ]

        return await self._in_thread(work, self.limits.statement_timeout)

    async def describe_table(self, name: str) -> TableDescription | None:
        def work() -> TableDescription | None:
            with _session_from(self._readers, self.limits.statement_timeout) as connection:
                catalog = {row[0]: row for row in connection.execute(_CATALOG_SQL)}
                if name not in catalog:
                    return None
                _, kind, sql = catalog[name]
                if kind == "view":  # its columns come from compiling it, which no time limit stops
                    views = self._schema_at(connection, schema_version(connection)).views
                    if copied_tokens(f"SELECT * FROM {quote_identifier(name)}", views) > COPY_LIMIT:
                        raise InvalidStatement(
                            f"SQLite cannot describe the view {name!r}: it names its WITH queries or views so many "
                            f"times over, nested, that SQLite would copy more than {COPY_LIMIT:,} tokens of them "
                            "while compiling it, which can take minutes. Its definition is in sqlite_schema."
                        )
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

        return await self._in_thread(work, self.limits.statement_timeout)

    async def aclose(self) -> None:
        inline = (self._inline_reader, self._inline_inspector, self._inline_writer)
        long_statements = (self._long_statement_inspector, self._long_statement_reader, self._long_statement_writer)
        for connection in (*self._all_readers, *self._all_inspectors, *long_statements, *inline, self._writer):
            connection.close()


@contextmanager
def _new_files_kept_on_success(approved: Classification) -> Iterator[None]:
    """Make each file a VACUUM INTO is to write, empty, before it runs (SQLite writes into an empty file), and
    take it away again if the run fails or is stopped: a half-written copy is not left behind. A file that
    already exists is left to SQLite, which refuses to write into it unless it is empty, and is never removed.
    """
    made: list[Path] = []
    for change in approved.changes:
        if change.kind is ChangeKind.VACUUM and change.target.type is ObjectType.FILE:
            path = file_path(change.target.name)
            if path is not None:
                with contextlib.suppress(OSError):  # there already, or cannot be made: SQLite will say why
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                    made.append(path)
    try:
        yield
    except BaseException:
        for path in made:
            with contextlib.suppress(OSError):
                path.unlink()
        raise


def _interrupt(held: list[GuardedConnection]) -> None:
    for connection in held:
        connection.interrupt_for(held)


# Statements nesting subqueries deeper than this are compiled in a worker thread: SQLite may copy each level's
# expressions into the level around it, a program that grows geometrically with the depth (see `subquery_depth`).
# Under 1,000 characters, three levels naming the one below 30 times each took 75 ms to compile, four 700 ms (out
# of memory at 30 names); two levels of 150 names each took 5 ms.
_SUBQUERY_DEPTH_ON_EVENT_LOOP = 2
# Statements joining more tables than this are compiled in a worker thread (see `tables_joined`): eight copies of an
# indexed table by NATURAL JOIN took some 8 ms to compile, where six took one.
_TABLES_ON_EVENT_LOOP = 6


# How many times its budget a read on the event loop may take, ended on its own, and still be tried there again.
_LONG_PAST_BUDGET = 10


class _TooDeepForTheEventLoop(Exception):
    """See `_SUBQUERY_DEPTH_ON_EVENT_LOOP`."""


@functools.lru_cache(maxsize=1024)  # asked on every call of a statement that runs on the event loop
def _slow_to_compile(statement: str) -> bool:
    """Whether the statement may take long to compile, by its text: it nests subqueries deeply, or joins many tables."""
    # Each level opens a parenthesis, and each table joined past the first needs a JOIN or a comma: a text with
    # few of them is neither (the common case, without tokenizing).
    few = statement.count("(") <= _SUBQUERY_DEPTH_ON_EVENT_LOOP
    if not few and subquery_depth(statement) > _SUBQUERY_DEPTH_ON_EVENT_LOOP:
        return True
    few_joined = statement.count(",") + statement.lower().count("join") < _TABLES_ON_EVENT_LOOP
    return not few_joined and tables_joined(statement) > _TABLES_ON_EVENT_LOOP


def _is_long(statement: str) -> bool:
    return len(statement) > LONG_STATEMENT_CHARS


@contextmanager
def _memory_released_after(statement: str) -> Iterator[None]:
    """Hand the memory that work on one of the longest statements took back to the system once it is done."""
    try:
        yield
    finally:
        if _is_long(statement):
            release_memory()


def _short_steps_only(classification: Classification) -> bool:
    """Whether the statement may run on the event loop's thread: each step of its program is short. SQLite
    checks its time limit only where its program jumps, so a row of many expressions runs to its end: their
    functions must be bounded (`calls_only_bounded_functions`), the values they build small (the event loop's
    connections build none past `connections.MAX_VALUE_BYTES_ON_EVENT_LOOP`), and the statement short, since
    each expression it writes may be one more such step (a table emptied or dropped whole is one, however large:
    `WHOLE_TABLE_STEP`); and it must not be slow to compile again (`EXPLAIN` of one is read-only): nesting subqueries
    deeply, or joining many tables."""
    statement = classification.statement
    return (
        len(statement) <= INLINE_STATEMENT_CHARS
        and calls_only_bounded_functions(classification)
        and not _slow_to_compile(statement)
    )


def _sets_connection(approved: Classification) -> bool:
    """Whether the approved statement may change how the writer it runs on behaves for later statements: a pragma
    such as `foreign_keys` or `ignore_check_constraints` holds on that connection only (and a dry run on another
    writer would show a change other than the one that runs), and so does a database attached."""
    return any(
        change.kind in _SETTING_CONNECTION
        and not (change.kind is ChangeKind.PRAGMA and change.target.name.lower() in _FILE_PRAGMAS)
        for change in approved.changes
    )


def _in_transaction(approved: Classification) -> bool:
    return not any(kind in _OUTSIDE_TRANSACTION for kind in approved.kinds)


def _pool(members: list[GuardedConnection]) -> queue.SimpleQueue[GuardedConnection]:
    pool: queue.SimpleQueue[GuardedConnection] = queue.SimpleQueue()
    for member in members:
        pool.put(member)
    return pool


@contextmanager
def _session_from(pool: queue.SimpleQueue[GuardedConnection], seconds: float) -> Iterator[sqlite3.Connection]:
    """A session on a connection taken from `pool` (waiting for one to be free, until the call's deadline),
    given back afterwards."""
    try:
        member = pool.get(timeout=connections.current_call().left())
    except queue.Empty:
        raise QueryTimeout(seconds) from None
    try:
        with member.session(seconds) as connection:
            yield connection
    finally:
        pool.put(member)


def _object_type(kind: str, sql: str | None) -> str:
    if kind == "table" and (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
        return "virtual table"
    return kind
