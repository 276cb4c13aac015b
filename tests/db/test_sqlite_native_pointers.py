"""`fts3_tokenizer(name, pointer)` makes SQLite call a native address, and what it registers outlives a
rollback. The deny list refuses calls in statements; a call stored in the schema (here a CHECK constraint)
is never reported to the authorizer, so every connection SafeDB opens refuses the function itself, and a
dry run of a statement that would reach it cannot plant the pointer before anyone answers."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite import connections
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryFailed

pytestmark = pytest.mark.anyio

PLANTING_CHECK = "fts3_tokenizer('simple', x'4141414141414141') IS NOT NULL"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A database that arrives with the trap: a CHECK constraint that registers a bogus tokenizer."""
    path = tmp_path / "trap.db"
    connection = sqlite3.connect(path)
    connection.execute(f"CREATE TABLE log (msg TEXT CHECK ({PLANTING_CHECK}))")
    connection.execute("CREATE VIRTUAL TABLE docs USING fts4(body)")
    connection.close()
    return path


@pytest.fixture
async def database(path: Path) -> AsyncIterator[SqliteDatabase]:
    database = SqliteDatabase(path, QueryLimits())
    try:
        yield database
    finally:
        await database.aclose()


@pytest.mark.parametrize(
    "opener", [connections.open_reader, connections.open_inspector, connections.open_writer], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("sql", ["SELECT fts3_tokenizer('simple')", f"SELECT {PLANTING_CHECK}"])
def test_every_connection_refuses_fts3_tokenizer(
    path: Path, opener: Callable[[Path], connections.GuardedConnection], sql: str
) -> None:
    guarded = opener(path)
    try:
        with pytest.raises(sqlite3.OperationalError):
            guarded.connection.execute(sql)
    finally:
        guarded.connection.close()


async def test_a_dry_run_cannot_reach_the_stored_call(database: SqliteDatabase, path: Path) -> None:
    classification = await database.classify("INSERT INTO log (msg) VALUES ('x')")

    impact = await database.preview(classification)
    with pytest.raises(QueryFailed):
        await database.write(classification, impact.bounds)

    assert impact.rows_affected is None
    assert "the dry run did not finish" in impact.lines[0]
    with closing(sqlite3.connect(path)) as check, check:
        assert check.execute("SELECT count(*) FROM log").fetchone() == (0,)
