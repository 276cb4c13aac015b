"""Input that SQLite takes and Python's sqlite3 did not: TEXT that is not UTF-8, and empty statements after the
last one (`SELECT 1;;`)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.inspector import without_trailing_empty_statements
from safedb.errors import EmptyStatement, InvalidStatement, MultipleStatements
from safedb.sql.classification import ChangeKind

pytestmark = pytest.mark.anyio


@pytest.fixture
def latin1_database(database_file: Path) -> Path:
    """`items` with one more row, whose name a program stored as Latin-1 bytes: 'caf\\xe9' in a TEXT column."""
    connection = sqlite3.connect(database_file)
    connection.execute("INSERT INTO items (id, name) VALUES (3, CAST(x'636166e9' AS TEXT))")
    connection.commit()
    connection.close()
    return database_file


async def test_text_that_is_not_utf8_is_read_with_replacement_characters(latin1_database: Path) -> None:
    database = SqliteDatabase(latin1_database, QueryLimits())
    try:
        read = await database.classify("SELECT id, name, typeof(name) FROM items ORDER BY id")
        assert (await database.read(read)).rows == ((1, "a", "text"), (2, "b", "text"), (3, "caf\ufffd", "text"))
        description = await database.describe_table("items")
        assert description is not None
        assert description.row_count == 3
    finally:
        await database.aclose()


async def test_a_change_returning_text_that_is_not_utf8_is_measured_and_runs(latin1_database: Path) -> None:
    database = SqliteDatabase(latin1_database, QueryLimits())
    try:
        change = await database.classify("DELETE FROM items WHERE id = 3 RETURNING name")
        impact = await database.preview(change)
        assert impact.rows_affected == 1, impact.lines
        outcome = await database.write(change, impact.bounds)
        assert outcome.rows_affected == 1
        assert outcome.returned is not None
        assert outcome.returned.rows == (("caf\ufffd",),)
    finally:
        await database.aclose()
    with closing(sqlite3.connect(latin1_database)) as connection, connection:
        assert connection.execute("SELECT count(*) FROM items").fetchone() == (2,)


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("SELECT 1;;", "SELECT 1;"),
        ("SELECT 1; ;\n ;\t", "SELECT 1;"),
        ("SELECT ';;';;", "SELECT ';;';"),
        ("SELECT 1 /* ; */;;", "SELECT 1 /* ; */;"),
        # Unchanged: no empty statement, or the `;` are not SQL's (in a comment, in a string left open).
        ("SELECT 1;", "SELECT 1;"),
        ("SELECT 1; ", "SELECT 1; "),
        ("SELECT 1 -- ;;", "SELECT 1 -- ;;"),
        ("SELECT ';;", "SELECT ';;"),
        ("SELECT 1 /* ;;", "SELECT 1 /* ;;"),
    ],
)
def test_only_empty_statements_after_a_complete_one_are_left_out(sql: str, statement: str) -> None:
    assert without_trailing_empty_statements(sql) == statement


async def test_empty_statements_after_the_last_one_are_ignored(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        read = await database.classify("SELECT count(*) FROM items;; ;\n")
        assert read.read_only
        assert (await database.read(read)).rows == ((2,),)
        change = await database.classify("DELETE FROM items WHERE id = 1;;")
        assert change.kinds == (ChangeKind.DELETE,)
        assert (await database.preview(change)).rows_affected == 1
        trigger = await database.classify("CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT 1; SELECT 2; END;;")
        assert trigger.kinds == (ChangeKind.CREATE,)
        with pytest.raises(EmptyStatement):
            await database.classify(";; ;")
        with pytest.raises(MultipleStatements):
            await database.classify("SELECT 1;; DELETE FROM items")
        with pytest.raises(InvalidStatement):  # a trigger whose body never ends is not made whole
            await database.classify("CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT 1;;")
    finally:
        await database.aclose()
