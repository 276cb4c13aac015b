"""Seventh red-team pass over the SQLite backend: what it found, as tests.

- The rows a change RETURNs were read 256 at a time in its dry run (`fetchmany(256)`), and all of them at once
  once approved (`fetchall()`, after the capped result was taken), only to be thrown away. Python's copies of
  them are outside SQLite's 512 MiB heap limit: `INSERT ... SELECT ... RETURNING zeroblob(50000000)` over 16
  rows held 800 MB in the server process during its dry run, which runs before anyone is asked; an approved
  insert of 400 rows of 1 MB, `RETURNING name`, held 400 MB to answer with none of them (truncated).
- SQLite keeps the rows a sort, a GROUP BY, DISTINCT or a materialized WITH query cannot hold in its page cache
  in temporary files (`temp_store` is FILE by default), which SQLite's heap limit does not count: a read that
  sorts an endless recursive WITH query of 100 kB rows wrote 2 GB to temporary files in 8 s (each of four
  readers can, for a whole time limit; on a `/tmp` in memory, `tmpfs`, that is memory). Readers now keep them
  in memory; so do the dry runs of changes, made before anyone is asked, which wrote them too (1.3 GB in
  their 5 s).
- Statements are sent to a worker thread when their own text nests subqueries deeply, but SQLite compiles the
  views a statement reads and the triggers its change fires into it: `SELECT * FROM v`, where `v` nests twelve
  flattened subqueries, held the event loop for 2 s on every call, a read that needs no approval once the view
  exists (likewise a one-row DELETE on a table whose trigger nests them). Now the schema's nesting counts too.
  The first classification after a schema change also compiled every view on the event loop, to read
  `pragma_table_list` (0.5 s for that view, once per connection and schema version); fixed in a later pass.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.connections import dry_run_in_memory
from safedb.errors import InvalidStatement, QueryFailed, QueryTimeout
from tests.helpers import watching_the_loop

pytestmark = pytest.mark.anyio

_MB = 1_000_000

T = TypeVar("T")


def _numbers(count: int) -> str:
    return f"(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {count}) SELECT x FROM c)"


async def _with_peak(work: Awaitable[T]) -> tuple[T, int]:
    """What `work` returns, and the most memory Python held while it ran."""
    tracemalloc.start()
    try:
        result = await work
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_dry_run_holds_one_returned_row_at_a_time(database_file: Path) -> None:
    """The dry run is made before anyone is asked: 12 rows of 40 MB each took 480 MB of Python's memory. (SQLite
    holds them too, until the statement ends, within its heap limit: rows of 30 MB here, so that they fit.)"""
    statement = f"INSERT INTO items (name) SELECT x FROM {_numbers(12)} RETURNING zeroblob(30000000)"
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        classification = await database.classify(statement)
        impact, peak = await _with_peak(database.preview(classification))
    finally:
        await database.aclose()
    assert impact.rows_affected == 12
    assert peak < 200 * _MB, f"the dry run held {peak / _MB:.0f} MB of returned rows"


async def test_an_approved_change_does_not_keep_every_returned_row(database_file: Path) -> None:
    """Past the result's caps, the rest of the RETURNING rows were read all at once to finish the statement."""
    statement = f"INSERT INTO items (name) SELECT randomblob(1000000) FROM {_numbers(300)} RETURNING name"
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        classification = await database.classify(statement)
        impact = await database.preview(classification)
        outcome, peak = await _with_peak(database.write(classification, impact.bounds))
    finally:
        await database.aclose()
    assert outcome.rows_affected == 300
    assert outcome.returned is not None
    assert outcome.returned.truncated
    assert peak < 100 * _MB, f"the approved change held {peak / _MB:.0f} MB of returned rows it did not return"


def _temporary_file_bytes() -> int:
    """What the SQLite temporary files this process holds open take (SQLite deletes them as it opens them)."""
    total = 0
    for descriptor in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{descriptor}")
            if "etilqs_" in target:
                total += os.stat(f"/proc/self/fd/{descriptor}").st_size
        except OSError:
            continue
    return total


_ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "


@contextmanager
def _temporary_files_watched() -> Iterator[list[int]]:
    """The most bytes of temporary files seen at once while the block runs (`[peak]` once it ends)."""
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _temporary_file_bytes())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result: list[int] = []
    try:
        yield result
    finally:
        done.set()
        watcher.join()
        result.append(peak)


_NEEDS_PROC = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the process's open files from /proc")


@_NEEDS_PROC
async def test_a_read_keeps_its_temporary_rows_within_the_heap_limit(database_file: Path) -> None:
    """SQLite's heap limit (512 MiB) bounds a read's memory only if its temporary rows stay in memory too."""
    statement = _ENDLESS + "SELECT x, randomblob(100000) FROM c ORDER BY 2"
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=5.0))
    try:
        classification = await database.classify(statement)
        assert classification.read_only
        # Out of SQLite's memory, or stopped at its time limit: either will do.
        with _temporary_files_watched() as peak, pytest.raises((QueryFailed, QueryTimeout)):
            await database.read(classification)
    finally:
        await database.aclose()
    assert peak[0] < 256 * _MB, f"a read wrote {peak[0] / _MB:.0f} MB of temporary files"


@_NEEDS_PROC
async def test_a_dry_run_keeps_its_temporary_rows_within_the_heap_limit(database_file: Path) -> None:
    """The same in a change's dry run, made before anyone is asked (1.3 GB within its 5 s limit). Writers keep
    them in memory for dry runs only: approved changes may need the files (CREATE INDEX on a large table)."""
    statement = f"DELETE FROM items WHERE id IN ({_ENDLESS}SELECT x FROM c ORDER BY randomblob(100000) || x)"
    database = SqliteDatabase(database_file, QueryLimits(preview_timeout=5.0))
    try:
        classification = await database.classify(statement)
        with _temporary_files_watched() as peak, contextlib.suppress(QueryTimeout):
            await database.preview(classification)  # a preview that did not finish, or stopped
    finally:
        await database.aclose()
    assert peak[0] < 256 * _MB, f"a dry run wrote {peak[0] / _MB:.0f} MB of temporary files"


@pytest.mark.parametrize("setting", [0, 1, 2])
def test_a_writer_keeps_its_own_temporary_storage_after_a_dry_run(database_file: Path, setting: int) -> None:
    """Dry runs keep temporary rows and changed pages in memory; the writer then goes back to where it kept them
    (by default in files, which an approved CREATE INDEX on a large table needs; or where an approved pragma put
    them)."""
    with contextlib.closing(sqlite3.connect(database_file, isolation_level=None)) as connection:
        connection.execute(f"PRAGMA temp_store = {setting}")
        with dry_run_in_memory(connection):
            assert connection.execute("PRAGMA temp_store").fetchone() == (2,)
            assert connection.execute("PRAGMA cache_spill").fetchone() == (0,)
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("SELECT * FROM items ORDER BY randomblob(8)").fetchall()  # opens temporary storage
            connection.execute("ROLLBACK")
        assert connection.execute("PRAGMA temp_store").fetchone() == (setting,)
        assert connection.execute("PRAGMA cache_spill").fetchone() != (0,)  # large approved changes spill again


def _flattened(levels: int) -> str:
    """Subqueries in FROM, each naming the column of the one below three times (see test_sqlite_redteam6)."""
    query = "SELECT 1 AS x"
    for _ in range(levels):
        query = f"SELECT x + x + x AS x FROM ({query})"
    return query


_NESTED_SCHEMAS = pytest.mark.parametrize(
    ("schema", "statement"),
    [
        (f"CREATE VIEW v AS {_flattened(12)}", "SELECT * FROM v"),
        (
            "CREATE TABLE log (n); "
            f"CREATE TRIGGER keep AFTER DELETE ON items BEGIN INSERT INTO log SELECT x FROM ({_flattened(12)}); END",
            "DELETE FROM items WHERE id = 1",
        ),
    ],
    ids=["view", "trigger"],
)


async def _longest_hold_while_classifying(database: SqliteDatabase, statement: str) -> float:
    async def classify() -> object:
        try:
            return await database.classify(statement)
        except (InvalidStatement, QueryFailed, QueryTimeout) as exc:  # refused or stopped: both fine
            return exc

    _, longest = await watching_the_loop(classify)
    return longest


@_NESTED_SCHEMAS
async def test_subqueries_nested_in_the_schema_do_not_hold_up_the_event_loop(
    database_file: Path, schema: str, statement: str
) -> None:
    """Statements nesting subqueries more than four deep are classified in a worker thread, but the depth was read
    from the statement's text only: a short one that names a view (or changes a table with a trigger) nesting them
    twelve deep was compiled on the event loop, holding it for 1.5 to 2 s, on every call (each is refused, past
    the program's bound, and a refusal is not remembered). A read needs no approval once the view is there."""
    with contextlib.closing(sqlite3.connect(database_file)) as connection:
        connection.executescript(schema)
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=5.0))
    try:
        await _longest_hold_while_classifying(database, statement)  # see the test below
        longest = await _longest_hold_while_classifying(database, statement)
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"


async def test_a_view_nesting_subqueries_deeply_does_not_hold_up_the_event_loop_once_per_schema(
    database_file: Path,
) -> None:
    """The first classification after a schema change read `pragma_table_list` on the event loop (to find the
    shadow tables), and SQLite compiles every view to count its columns there: 0.5 s for the view below. The
    event loop's writer did the same for its first dry run. Shadow tables are now read from sqlite_schema."""
    with contextlib.closing(sqlite3.connect(database_file)) as connection:
        connection.executescript(f"CREATE VIEW v AS {_flattened(12)}")
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=5.0))
    try:
        longest = await _longest_hold_while_classifying(database, "SELECT * FROM items")
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"
