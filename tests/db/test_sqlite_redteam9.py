"""Ninth red-team pass over the SQLite backend (2026-11-28): what it found, as tests.

- `ALTER TABLE t RENAME TO t2` showed only `table t`, while SQLite also rewrote the triggers and views that name
  it (and a column's rename those that name the column). The preview now lists them, found by renaming within a
  transaction that is rolled back.
- `DROP TABLE` of a virtual table (an FTS index) did not say how many rows would be lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from tests.helpers import rows

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);
CREATE TABLE log (message TEXT);
CREATE TRIGGER t_deleted AFTER DELETE ON t BEGIN INSERT INTO log VALUES (old.a); END;
CREATE VIEW t_view AS SELECT a FROM t;
CREATE TABLE other (b TEXT);
CREATE VIEW other_view AS SELECT b FROM other;
CREATE VIRTUAL TABLE notes USING fts5(body);
INSERT INTO notes VALUES ('one'), ('two'), ('three');
"""


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
    served = SqliteDatabase(path, QueryLimits())
    try:
        yield served, path
    finally:
        await served.aclose()


def definitions(path: Path) -> list[tuple[str, str]]:
    return rows(path, "SELECT name, sql FROM sqlite_schema ORDER BY name")


@pytest.mark.parametrize(
    ("sql", "rewritten"),
    [
        ("ALTER TABLE t RENAME TO t2", "trigger t_deleted, view t_view"),
        ("ALTER TABLE t RENAME COLUMN a TO a2", "trigger t_deleted, view t_view"),
        ("ALTER TABLE log RENAME TO journal", "trigger t_deleted"),
    ],
)
async def test_a_rename_lists_the_definitions_it_rewrites(
    database: tuple[SqliteDatabase, Path], sql: str, rewritten: str
) -> None:
    served, path = database
    before = definitions(path)

    impact = await served.preview(await served.classify(sql))

    assert f"Also rewrites the definitions of: {rewritten}." in impact.lines
    assert not any("other_view" in line for line in impact.lines)
    assert definitions(path) == before, "the rename was rolled back"


async def test_a_change_that_names_nothing_else_rewrites_nothing(database: tuple[SqliteDatabase, Path]) -> None:
    served, _ = database
    impact = await served.preview(await served.classify("ALTER TABLE other ADD COLUMN c TEXT"))
    assert not any("rewrites" in line for line in impact.lines)


async def test_dropping_a_virtual_table_says_how_many_rows_go(database: tuple[SqliteDatabase, Path]) -> None:
    served, path = database
    impact = await served.preview(await served.classify("DROP TABLE notes"))
    assert "DROP VIRTUAL TABLE notes: 3 rows will be lost." in impact.lines
    assert rows(path, "SELECT count(*) FROM notes") == [(3,)]
