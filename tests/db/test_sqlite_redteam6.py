"""Sixth red-team pass over the SQLite backend: what it found, as tests.

- SQLite checks its progress handler and `sqlite3_interrupt()` only when its program jumps (the bottom of a
  loop, a Goto). One row whose result columns each concatenate a 32 MiB string (`s || s`, an operator, so the
  read counted as calling only short functions) ran on the event loop, one column after the other: 100 columns
  held it for 19 s under a 2 s time limit; the same in a change's WHERE, in its dry run. Now the event loop's
  connections build no value past 1 MiB (such work runs again in a worker thread) and take statements of up
  to 1,000 characters only. In a worker thread the call ends at its time limit, but the thread runs on to the
  end of the stretch, holding its reader and its lock on the file (fixed since: once interrupted, a connection
  builds no value of more than a byte, so the stretch fails at its next value; see test_sqlite_function_sweep_redteam1).
- Subqueries in FROM are flattened into the query that names them: each level that names the column of the
  level below three times triples the expression, so twelve levels (313 characters) made SQLite compile, and
  SafeDB list, a program of a million instructions: 6 s on the event loop while classifying (thirteen levels:
  16 s and 1.2 GB). Now statements nesting subqueries deeper than four levels are compiled in a worker thread,
  and a program longer than its bound (`inspector._program`) is refused.
- SQLite reports the name of a WITH query as the "source" of the actions inside it, as it does a view's; a
  table-valued pragma read there (`WITH o AS (SELECT * FROM pragma_optimize) SELECT * FROM o`) was taken for a
  plain read. The reader's authorizer still refused the pragma when it ran, so nothing changed.
- A statement that ends in empty statements (`;;`) and holds text Python cannot encode (a lone surrogate, which
  JSON can carry as `\\ud800`) or a NUL made `sqlite3.complete_statement` raise, which nothing caught: the tool
  call ended in an error with a traceback in the log, and nothing in the audit log.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import InvalidStatement, QueryFailed, QueryTimeout
from tests.helpers import watching_the_loop

pytestmark = pytest.mark.anyio

# `s`: 2**25 characters (32 MiB), built by doubling in 26 iterations: fewer than the 1,000 steps after which
# the event loop's connections check their time limit at all.
_DOUBLED = "WITH RECURSIVE d(n, s) AS (SELECT 0, 'a' UNION ALL SELECT n + 1, s || s FROM d WHERE n < 25) "


def straight_line_read(columns: int, extra: str = "") -> str:
    """One row of `columns` columns, each a 64 MiB concatenation: a program without a jump between them."""
    return _DOUBLED + f"SELECT {extra}{', '.join(['length(s || s)'] * columns)} FROM d WHERE n = 25"


async def test_a_read_without_jumps_does_not_hold_up_the_event_loop(database_file: Path) -> None:
    """Only bounded functions (`length`) and an operator: the read runs on the event loop, and SQLite never
    reaches a check of its 2 ms budget or of the 0.5 s time limit until the row is done (some 5 s here)."""
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=0.5))
    try:
        classification = await database.classify(straight_line_read(25))
        assert classification.read_only
        started = time.monotonic()

        async def read() -> object:
            try:
                return await database.read(classification)
            except QueryTimeout as exc:
                return exc

        _, longest = await watching_the_loop(read)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"
    assert elapsed < 1.5, f"a 0.5 s time limit let the read run for {elapsed:.2f} s"


async def test_a_dry_run_without_jumps_does_not_hold_up_the_event_loop(database_file: Path) -> None:
    """The same stretch inside a change: its dry run, made before anyone is asked, runs on the event loop's
    writer and holds the event loop (and the write lock) until it is done, past its 0.5 s limit."""
    terms = " + ".join(["length(s || s)"] * 25)
    statement = _DOUBLED + f"DELETE FROM items WHERE id = (SELECT {terms} FROM d WHERE n = 25)"
    database = SqliteDatabase(database_file, QueryLimits(preview_timeout=0.5))
    try:
        classification = await database.classify(statement)
        assert not classification.read_only
        started = time.monotonic()

        async def preview() -> None:
            # Past 1 MiB on the event loop's writer, it is measured again in a worker thread, within its limit.
            with pytest.raises(QueryTimeout):
                await database.preview(classification)

        _, longest = await watching_the_loop(preview)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"
    assert elapsed < 1.5, f"a 0.5 s limit let the dry run go on for {elapsed:.2f} s"


async def test_a_read_without_jumps_lets_go_of_the_file_at_its_time_limit(database_file: Path) -> None:
    """`printf` sends the read to a worker thread. Every column is a constant, computed once before the first
    row, in one stretch of the program without a jump (after the SHARED lock is taken). The call ends with
    QueryTimeout at the limit, but the thread runs on to the end, holding the reader and its lock: another
    program's INSERT (and SafeDB's own approved changes, after their 5 s busy timeout) fail with "database is
    locked" for as long as it runs (several seconds here)."""
    doubled = "printf('%.*c', 33554432, 'a')"
    columns = ", ".join(f"length({doubled} || {doubled}) + {i}" for i in range(12))
    statement = f"SELECT id, {columns} FROM items LIMIT 1"
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=0.5))
    try:
        classification = await database.classify(statement)
        assert classification.read_only
        with pytest.raises(QueryTimeout):
            await database.read(classification)
        other = sqlite3.connect(database_file, timeout=1.0)
        try:
            other.execute("INSERT INTO items (name) VALUES ('c')")
            other.commit()  # sqlite3.OperationalError: database is locked
        finally:
            other.close()
    finally:
        await database.aclose()


def flattened(levels: int) -> str:
    """Subqueries in FROM, each naming the column of the one below three times: SQLite flattens them into one
    expression of 3**levels terms."""
    query = "SELECT 1 AS x"
    for _ in range(levels):
        query = f"SELECT x + x + x AS x FROM ({query})"
    return query


async def test_subqueries_flattened_many_times_over_do_not_hold_up_the_event_loop(database_file: Path) -> None:
    statement = flattened(12)
    assert len(statement) < 1000  # classified on the event loop's own inspector
    # Compiling it takes about 1 s here; the limit leaves room for a loaded machine, where 2 s was not enough and
    # the time limit, not the refusal, ended the classification.
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=10.0))
    try:

        async def classify() -> object:
            try:
                return await database.classify(statement)
            except (InvalidStatement, QueryTimeout) as exc:  # refused before compiling, or stopped: both fine
                return exc

        _, longest = await watching_the_loop(classify)
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"
    assert isinstance(_, InvalidStatement), "a program of a million instructions was not refused"


async def test_an_explain_of_subqueries_flattened_many_times_over_is_read_off_the_event_loop(
    database_file: Path,
) -> None:
    """`EXPLAIN` of the same lists the program rather than compiling it for SafeDB, and is a read; reading it
    compiles it again."""
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=2.0))
    try:
        classification = await database.classify("EXPLAIN " + flattened(12))
        assert classification.read_only

        async def read() -> object:
            try:
                return await database.read(classification)
            except QueryFailed as exc:  # out of SQLite's memory, or past the time limit: both fine
                return exc

        _, longest = await watching_the_loop(read)
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"


@pytest.mark.parametrize(
    "statement",
    [
        "WITH o AS (SELECT * FROM pragma_optimize) SELECT * FROM o",
        "WITH o AS MATERIALIZED (SELECT * FROM pragma_optimize(0xfffe)) SELECT * FROM o",
    ],
)
async def test_a_table_valued_pragma_inside_a_with_query_is_not_taken_for_a_read(
    database_file: Path, statement: str
) -> None:
    """Outside a WITH query (`SELECT * FROM pragma_optimize`) the same read is a pragma change."""
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        classification = await database.classify(statement)
    finally:
        await database.aclose()
    assert not classification.read_only


@pytest.mark.parametrize(
    "statement", ["SELECT '\ud800';;", "SELECT 1\x00;;", "DELETE FROM items WHERE name = '\ud800';;"]
)
async def test_text_python_cannot_encode_before_empty_statements_is_invalid(
    database_file: Path, statement: str
) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        with pytest.raises(InvalidStatement):
            await database.classify(statement)
    finally:
        await database.aclose()
