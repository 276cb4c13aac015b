"""Eighth red-team pass over the SQLite backend (2026-11-28): what it found, as tests.

- The dry run of a change, made before anyone is asked, let SQLite write the pages it changed to the database's
  files once its page cache was full: `INSERT INTO t (b) SELECT zeroblob(10000000) FROM` 100,000 numbers wrote
  2.4 GB within its 5 s time limit in rollback-journal mode, and in WAL mode left a -wal file of 2.1 GB after
  its rollback, which stays until a checkpoint. The pages it changes now stay in memory, within SQLite's heap
  limit (`connections.dry_run_in_memory`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase

pytestmark = pytest.mark.anyio

_MB = 1_000_000


@contextlib.contextmanager
def _largest_directory(directory: Path) -> Iterator[list[int]]:
    """The largest total size of the files in `directory` seen while the block runs (sampled every millisecond)."""
    largest = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.001):
            with contextlib.suppress(FileNotFoundError):
                largest[0] = max(largest[0], sum(entry.stat().st_size for entry in directory.iterdir()))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield largest
    finally:
        done.set()
        watcher.join()


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
async def test_a_dry_run_writes_the_pages_it_changes_nowhere(tmp_path: Path, journal_mode: str) -> None:
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(f"PRAGMA journal_mode = {journal_mode}")
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
    statement = (
        "INSERT INTO t (b) SELECT zeroblob(1000000) FROM "
        "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40) SELECT x FROM c)"
    )
    database = SqliteDatabase(path, QueryLimits())
    try:
        classification = await database.classify(statement)
        with _largest_directory(tmp_path) as largest:
            impact = await database.preview(classification)
        left = {entry.name: entry.stat().st_size for entry in tmp_path.iterdir()}
    finally:
        await database.aclose()

    assert impact.rows_affected == 40  # 40 MB of pages, twenty times the page cache
    assert largest[0] < 2 * _MB, f"the dry run wrote {largest[0] / _MB:.0f} MB"
    assert left.get("app.db-wal", 0) < 2 * _MB, left
