"""An approved VACUUM INTO that fails or is stopped leaves no half-written copy behind, and never removes a file
that was there before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryFailed, QueryTimeout

pytestmark = pytest.mark.anyio


def make_database(path: Path, rows: int) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    connection.executemany("INSERT INTO notes (body) VALUES (?)", ((f"note {n} " * 12,) for n in range(rows)))
    connection.commit()
    connection.close()


async def vacuum_into(database: SqliteDatabase, target: Path) -> None:
    classification = await database.classify(f"VACUUM INTO '{target}'")
    await database.write(classification)


async def test_a_vacuum_into_stopped_by_the_time_limit_leaves_no_file(tmp_path: Path) -> None:
    make_database(tmp_path / "big.db", 200_000)
    database = SqliteDatabase(tmp_path / "big.db", QueryLimits(statement_timeout=0.02))
    target = tmp_path / "copy.db"
    try:
        with pytest.raises(QueryTimeout):
            await vacuum_into(database, target)
    finally:
        await database.aclose()

    assert not target.exists()


async def test_a_vacuum_into_a_file_that_is_there_fails_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    make_database(tmp_path / "app.db", 10)
    database = SqliteDatabase(tmp_path / "app.db", QueryLimits())
    target = tmp_path / "keep.db"
    target.write_bytes(b"someone else's file")
    try:
        with pytest.raises(QueryFailed):
            await vacuum_into(database, target)
    finally:
        await database.aclose()

    assert target.read_bytes() == b"someone else's file"


async def test_a_vacuum_into_that_finishes_writes_the_whole_copy(tmp_path: Path) -> None:
    make_database(tmp_path / "app.db", 1_000)
    database = SqliteDatabase(tmp_path / "app.db", QueryLimits())
    target = tmp_path / "copy.db"
    try:
        await vacuum_into(database, target)
    finally:
        await database.aclose()

    copy = sqlite3.connect(target)
    try:
        assert copy.execute("SELECT count(*) FROM notes").fetchone() == (1_000,)
    finally:
        copy.close()
