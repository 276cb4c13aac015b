"""Short reads and classifications run on the event loop's thread; anything that would hold it up moves
to a worker thread."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase

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


class LoopWatch:
    """Measures the longest time the event loop went without running this task's next step."""

    def __init__(self) -> None:
        self.longest = 0.0

    async def run(self, until: anyio.Event) -> None:
        last = time.monotonic()
        while not until.is_set():
            await anyio.sleep(0.005)
            now = time.monotonic()
            self.longest = max(self.longest, now - last - 0.005)
            last = now


async def read_while_watching(database: SqliteDatabase, sql: str) -> tuple[list[tuple[object, ...]], float]:
    watch = LoopWatch()
    done = anyio.Event()
    rows: list[tuple[object, ...]] = []

    async def read() -> None:
        try:
            rows.extend((await database.read(await database.classify(sql))).rows)
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(watch.run, done)
        group.start_soon(read)
    return rows, watch.longest


async def test_a_long_read_does_not_hold_up_the_event_loop(database_path: Path) -> None:
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        for _ in range(2):  # the second time it is known to be long
            rows, longest = await read_while_watching(database, LONG_READ)
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
    writer = sqlite3.connect(database_path, isolation_level=None, check_same_thread=False)
    try:
        if known:
            await database.read(await database.classify("SELECT id FROM t ORDER BY id"))
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("INSERT INTO t VALUES (4)")

        async def commit_later() -> None:
            await anyio.sleep(0.5)
            writer.execute("COMMIT")

        async with anyio.create_task_group() as group:
            group.start_soon(commit_later)
            rows, longest = await read_while_watching(database, "SELECT id FROM t ORDER BY id")
        assert rows == [(1,), (2,), (3,), (4,)]  # it waited for the commit, then read
        assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
    finally:
        writer.close()
        await database.aclose()
