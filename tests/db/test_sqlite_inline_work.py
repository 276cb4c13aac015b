"""Short reads and classifications run on the event loop's thread; anything that would hold it up moves
to a worker thread."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from tests.helpers import watching_the_loop, watching_the_loop_while_locked

pytestmark = pytest.mark.anyio

# About a second of SQLite work that returns a single row.
LONG_READ = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000000) SELECT count(*) FROM n"


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    path = tmp_path / "inline.db"
    connection = sqlite3.connect(path)
    connection.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3);")
    connection.close()
    return path


async def read(database: SqliteDatabase, sql: str) -> list[tuple[object, ...]]:
    return list((await database.read(await database.classify(sql))).rows)


async def test_a_long_read_does_not_hold_up_the_event_loop(database_path: Path) -> None:
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        for _ in range(2):  # the second time it is known to be long
            rows, longest = await watching_the_loop(lambda: read(database, LONG_READ))
            assert rows == [(3000000,)]
            assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
    finally:
        await database.aclose()


@pytest.mark.parametrize("known", [True, False], ids=["known statement", "new statement"])
async def test_a_read_waits_for_a_writers_lock_without_holding_up_the_event_loop(
    database_path: Path, known: bool
) -> None:
    """With a rollback journal, a writer committing holds an exclusive lock that readers must wait out,
    both to classify a statement and to run it."""
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        if known:
            await database.read(await database.classify("SELECT id FROM t ORDER BY id"))
        rows, longest = await watching_the_loop_while_locked(
            database_path,
            ["BEGIN EXCLUSIVE", "INSERT INTO t VALUES (4)"],
            lambda: read(database, "SELECT id FROM t ORDER BY id"),
        )
        assert rows == [(1,), (2,), (3,), (4,)]  # it waited for the commit, then read
        assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
    finally:
        await database.aclose()


def table_ids(path: Path) -> list[int]:
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("SELECT id FROM t ORDER BY id")]
    finally:
        connection.close()


async def test_a_long_change_is_previewed_and_run_once_without_holding_up_the_event_loop(database_path: Path) -> None:
    """Both start on the event loop's thread, are stopped at the budget and rolled back, and run again in a
    worker thread: the rows are counted once and inserted once (a second insert would break the key)."""
    database = SqliteDatabase(database_path, QueryLimits())
    added = 1_000_000
    insert = (
        f"INSERT INTO t (id) WITH RECURSIVE n(x) AS (SELECT 10 UNION ALL SELECT x + 1 FROM n WHERE x < {added + 9}) "
        "SELECT x FROM n"
    )
    try:
        classification = await database.classify(insert)
        impact, longest_preview = await watching_the_loop(lambda: database.preview(classification))
        assert impact.rows_affected == added, impact.lines
        assert table_ids(database_path) == [1, 2, 3]  # the dry run was rolled back
        outcome, longest_write = await watching_the_loop(lambda: database.write(classification))
        assert outcome.rows_affected == added
        ids = table_ids(database_path)
        assert len(ids) == added + 3
        assert ids[-1] == added + 9
        assert max(longest_preview, longest_write) < 0.25, (longest_preview, longest_write)
    finally:
        await database.aclose()


@pytest.mark.parametrize("lock", ["write", "read"])
async def test_a_change_waits_for_another_connections_lock_without_holding_up_the_event_loop(
    database_path: Path, lock: str
) -> None:
    """Another connection's write transaction blocks the dry run and the change; its read transaction
    (rollback journal) blocks only the change's commit. Both wait in a worker thread, then run once."""
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        classification = await database.classify("INSERT INTO t VALUES (4)")

        async def preview_and_write() -> tuple[int | None, int | None]:
            impact = await database.preview(classification)
            return impact.rows_affected, (await database.write(classification)).rows_affected

        statements = ["BEGIN IMMEDIATE"] if lock == "write" else ["BEGIN", "SELECT count(*) FROM t"]
        counts, longest = await watching_the_loop_while_locked(database_path, statements, preview_and_write)
        assert counts == (1, 1)
        assert table_ids(database_path) == [1, 2, 3, 4]
        assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
    finally:
        await database.aclose()
