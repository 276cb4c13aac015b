"""Repeated statements skip the inspection, but never across a schema change."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.known_statements import KnownStatements
from safedb.errors import InvalidStatement
from safedb.sql.classification import Classification

pytestmark = pytest.mark.anyio


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    path = tmp_path / "cache.db"
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE VIEW w AS SELECT id FROM t;")
    return path


def change_schema(path: Path, script: str) -> None:
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.close()


async def test_a_statement_is_classified_once_per_schema_version(database_path: Path) -> None:
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        first = await database.classify("SELECT * FROM w")
        assert first.read_only
        assert await database.classify("SELECT * FROM w") is first
        change_schema(database_path, "DROP VIEW w; CREATE TABLE w (id INTEGER);")
        second = await database.classify("SELECT * FROM w")
        assert second.read_only
        assert second is not first
        change_schema(database_path, "DROP TABLE w;")
        with pytest.raises(InvalidStatement, match="no such table"):
            await database.classify("SELECT * FROM w")
    finally:
        await database.aclose()


async def test_a_known_change_is_reinspected_after_a_schema_change(database_path: Path) -> None:
    """A trigger added after the first classification is part of the second one."""
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        first = await database.classify("DELETE FROM t")
        assert await database.classify("DELETE FROM t") is first
        change_schema(
            database_path,
            "CREATE TABLE gone (id INTEGER); CREATE TRIGGER t_gone AFTER DELETE ON t "
            "BEGIN INSERT INTO gone VALUES (OLD.id); END;",
        )
        again = await database.classify("DELETE FROM t")
        assert [str(change) for change in first.changes] == ["delete table t"]
        assert [str(change) for change in again.changes if change.via] == ["insert table gone via t_gone"]
    finally:
        await database.aclose()


async def test_a_statement_that_becomes_a_change_is_inspected_again(database_path: Path) -> None:
    """An INSERT into a view fails to compile; once the view has an INSTEAD OF trigger it is a change."""
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        with pytest.raises(InvalidStatement):
            await database.classify("INSERT INTO w (id) VALUES (1)")
        change_schema(
            database_path,
            "CREATE TRIGGER w_insert INSTEAD OF INSERT ON w BEGIN INSERT INTO t (id) VALUES (NEW.id); END;",
        )
        assert not (await database.classify("INSERT INTO w (id) VALUES (1)")).read_only
    finally:
        await database.aclose()


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = KnownStatements(size=2)
    read = Classification(statement="SELECT 1")
    cache.add("SELECT 1", 7, read)
    assert cache.get("SELECT 1", 7) is read
    assert cache.get("SELECT 1", 8) is None
    cache.add("SELECT 2", 7, Classification(statement="SELECT 2"))
    cache.get("SELECT 1", 7)  # now the most recently used
    cache.add("SELECT 3", 7, Classification(statement="SELECT 3"))
    assert cache.get("SELECT 2", 7) is None
    assert cache.get("SELECT 1", 7) is read


def test_long_statements_are_not_kept() -> None:
    cache = KnownStatements()
    long = "SELECT 1" + " " * KnownStatements.MAX_STATEMENT_CHARS
    cache.add(long, 1, Classification(statement=long))
    assert cache.get(long, 1) is None
