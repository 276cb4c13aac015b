"""Red team: work SQLite does in one stretch, which no time limit or interrupt stops, kept off the event loop.

A read under 1,000 characters joining some 40 copies of an indexed table by `NATURAL JOIN` held the event loop for
seconds while SQLite planned it (compiling checks no progress handler), and the dry run of `DELETE FROM <table>`
(one step of SQLite's program that frees every page of the table) held it for seconds on every call, declined or not.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.expansion import tables_joined
from safedb.sql.sqlite_actions import WHOLE_TABLE_STEP, calls_only_bounded_functions
from tests.helpers import watching_the_loop

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, status TEXT, created_at TEXT);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE INDEX orders_status ON orders (status);
CREATE INDEX orders_created ON orders (created_at);
CREATE INDEX orders_customer_status ON orders (customer_id, status);
INSERT INTO orders (customer_id, status) VALUES (1, 'new'), (2, 'paid');
"""
# Some 30 tables in under 1,000 characters: about a second of planning, and more on a slower machine.
MANY_JOINS = "SELECT count(*) FROM orders " + " ".join(f"NATURAL JOIN orders o{i}" for i in range(30))


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    path = tmp_path / "slow.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    connection.close()
    return path


@pytest.mark.parametrize(
    ("sql", "joined"),
    [
        ("SELECT a, b, c, d, e, f, g, h FROM t WHERE x IN (1, 2, 3, 4, 5, 6, 7)", 1),
        ("INSERT INTO t (a, b) VALUES (1, 2), (3, 4)", 0),
        ("SELECT * FROM a, b JOIN c ON a.x = c.x, (SELECT 1, 2) AS d WHERE a.y IN (1, 2)", 4),
        ("SELECT * FROM a LEFT JOIN b USING (x) NATURAL JOIN c", 3),
        ("UPDATE t SET a = 1, b = 2 FROM u, v WHERE t.id = u.id ORDER BY a, b", 2),
        ("SELECT (SELECT count(*) FROM a, b), x, y FROM c, d", 4),
        (MANY_JOINS, 31),
    ],
)
def test_the_tables_a_statement_joins_are_counted_from_its_text(sql: str, joined: int) -> None:
    assert tables_joined(sql) == joined


async def test_a_read_joining_many_tables_is_planned_off_the_event_loop(database_path: Path) -> None:
    assert len(MANY_JOINS) < 1_000  # short enough for the event loop, by its length
    database = SqliteDatabase(database_path, QueryLimits(statement_timeout=60))
    try:
        result, longest = await watching_the_loop(lambda: _read(database, MANY_JOINS))
        assert result == [(0,)]  # no row has created_at, which NATURAL JOIN compares too
        assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
    finally:
        await database.aclose()


async def _read(database: SqliteDatabase, sql: str) -> list[tuple[object, ...]]:
    return list((await database.read(await database.classify(sql))).rows)


@pytest.mark.parametrize(("sql", "whole"), [("DELETE FROM orders", True), ("DROP TABLE orders", True),
                                            ("DELETE FROM orders WHERE id = 1", False)])  # fmt: skip
async def test_a_table_emptied_or_dropped_in_one_step_is_never_worked_on_on_the_event_loop(
    database_path: Path, sql: str, whole: bool
) -> None:
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        classification = await database.classify(sql)
    finally:
        await database.aclose()

    assert (WHOLE_TABLE_STEP in classification.engine_view) is whole
    assert calls_only_bounded_functions(classification) is not whole
