"""A read runs with a LIMIT of one row past the row cap, so that SQLite sorts (and computes) no more rows than
SafeDB keeps; the rows are those the query gives first, and the statement as written is what is classified."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.row_limit import execute_read, with_row_limit

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("statement", "query"),
    [
        ("SELECT * FROM t", "SELECT * FROM t"),
        ("select a from t order by b desc", "select a from t order by b desc"),
        ("SELECT 1; ", "SELECT 1"),
        ("SELECT ';' FROM t;;  -- done; LIMIT 1", "SELECT ';' FROM t"),
        ("SELECT 1 -- a note", "SELECT 1 -- a note"),
        ("SELECT * FROM (SELECT * FROM t LIMIT 3)", "SELECT * FROM (SELECT * FROM t LIMIT 3)"),
        ("WITH c AS (SELECT 1 LIMIT 1) SELECT * FROM c", "WITH c AS (SELECT 1 LIMIT 1) SELECT * FROM c"),
        ('SELECT "limit", [limit], `limit` FROM t', 'SELECT "limit", [limit], `limit` FROM t'),
        ("SELECT 1 UNION ALL SELECT 2 ORDER BY 1", "SELECT 1 UNION ALL SELECT 2 ORDER BY 1"),
    ],
)
def test_a_query_without_a_limit_of_its_own_gets_one(statement: str, query: str) -> None:
    assert with_row_limit(statement, 6) == f"{query}\nLIMIT CAST(6 AS INTEGER)"


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM t LIMIT 10",
        "SELECT * FROM t ORDER BY a LiMiT 2 OFFSET 1",
        "WITH c AS (SELECT 1) SELECT * FROM c LIMIT 1",
        "VALUES (1), (2)",
        "PRAGMA table_info(t)",
        "EXPLAIN SELECT * FROM t",
        "EXPLAIN QUERY PLAN SELECT * FROM t",
        "",
        "  -- only a comment",
    ],
)
def test_other_reads_run_as_written(statement: str) -> None:
    assert with_row_limit(statement, 6) is None


def test_the_limited_text_is_what_sqlite_runs_and_a_refused_limit_runs_the_statement_as_written() -> None:
    connection = sqlite3.connect(":memory:")
    ran: list[str] = []
    connection.set_trace_callback(ran.append)
    with closing(execute_read(connection, "SELECT 1 UNION ALL SELECT 2", 6)) as cursor:
        assert cursor.fetchall() == [(1,), (2,)]
    # SQLite takes no LIMIT after a compound ending in VALUES: the statement runs as it was written.
    with closing(execute_read(connection, "SELECT 1 UNION ALL VALUES (2)", 6)) as cursor:
        assert cursor.fetchall() == [(1,), (2,)]
    assert ran == ["SELECT 1 UNION ALL SELECT 2\nLIMIT CAST(6 AS INTEGER)", "SELECT 1 UNION ALL VALUES (2)"]
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        execute_read(connection, "SELECT * FROM missing", 6)
    # A long statement is limited too (its limited text is not kept for the next read).
    long = "SELECT 1 AS " + "x" * 20_000
    ran.clear()
    with closing(execute_read(connection, long, 6)) as cursor:
        assert cursor.fetchall() == [(1,)]
    assert ran == [f"{long}\nLIMIT CAST(6 AS INTEGER)"]


def test_the_limit_leaves_the_plan_as_it_was() -> None:
    """A LIMIT written as a number is a hint to SQLite's planner, which then chose to build this subquery whole
    first (12.6 s) where the statement as written finds no row of `small` and stops (0.00 s)."""
    connection = sqlite3.connect(":memory:")
    connection.executescript(
        "CREATE TABLE small (id INTEGER PRIMARY KEY, x INT, flag TEXT); CREATE INDEX small_flag ON small (flag, x);"
        "CREATE TABLE n (v INT);"
    )
    connection.executemany("INSERT INTO small (x, flag) VALUES (?, ?)", [(i, f"f{i % 30}") for i in range(1000)])
    connection.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(200)])
    connection.execute("ANALYZE")
    query = (
        "SELECT a.x, s.v FROM small AS a, (SELECT DISTINCT n0.v + n1.v * n2.v AS v FROM n AS n0, n AS n1, n AS n2) "
        "AS s WHERE a.flag = 'zzz' ORDER BY a.x, s.v"
    )
    limited = with_row_limit(query, 501)
    assert limited is not None

    def plan(sql: str) -> list[str]:
        return [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]

    assert plan(limited) == plan(query)
    assert plan(f"{query} LIMIT 501") != plan(query)  # what a number would do


@pytest.fixture
async def numbers(tmp_path: Path) -> SqliteDatabase:
    """A database with `numbers` (n, parity) for n in 1..20, under a cap of 5 rows."""
    path = tmp_path / "numbers.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE numbers (n INTEGER PRIMARY KEY, parity TEXT)")
        connection.executemany(
            "INSERT INTO numbers VALUES (?, ?)", [(n, "odd" if n % 2 else "even") for n in range(1, 21)]
        )
        connection.commit()
    return SqliteDatabase(path, QueryLimits(max_rows=5))


@pytest.mark.parametrize(
    ("statement", "rows", "truncated"),
    [
        # The first five rows of the whole sort, and a sixth row tells that there were more.
        ("SELECT n FROM numbers ORDER BY parity, n DESC", [20, 18, 16, 14, 12], True),
        ("SELECT n FROM numbers ORDER BY n DESC;  -- newest first", [20, 19, 18, 17, 16], True),
        # Exactly as many rows as the cap: not cut.
        ("SELECT n FROM numbers WHERE n <= 5 ORDER BY n", [1, 2, 3, 4, 5], False),
        # A LIMIT of the query's own, below or above the cap, is kept.
        ("SELECT n FROM numbers ORDER BY n LIMIT 3", [1, 2, 3], False),
        ("SELECT n FROM numbers ORDER BY n LIMIT 8", [1, 2, 3, 4, 5], True),
        ("SELECT n FROM (SELECT n FROM numbers ORDER BY n DESC LIMIT 2) ORDER BY n", [19, 20], False),
        ("SELECT n FROM numbers WHERE n < 3 UNION ALL VALUES (7) UNION ALL VALUES (9)", [1, 2, 7, 9], False),
        ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c", [1, 2, 3, 4, 5], True),
    ],
)
async def test_reads_keep_the_rows_and_the_cut_of_the_whole_query(
    numbers: SqliteDatabase, statement: str, rows: list[int], truncated: bool
) -> None:
    try:
        classification = await numbers.classify(statement)
        assert classification.statement == statement
        result = await numbers.read(classification)
        assert [row[0] for row in result.rows] == rows
        assert result.truncated is truncated
    finally:
        await numbers.aclose()


async def test_the_largest_row_cap_is_a_limit_sqlite_takes(tmp_path: Path) -> None:
    """One past it, 2**63 was no integer to SQLite, and every read failed with "datatype mismatch"."""
    path = tmp_path / "few.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
        connection.execute("INSERT INTO t VALUES (2), (1)")
        connection.commit()
    database = SqliteDatabase(path, QueryLimits(max_rows=2**63 - 1))
    try:
        result = await database.read(await database.classify("SELECT a FROM t ORDER BY a"))
    finally:
        await database.aclose()
    assert result.rows == ((1,), (2,))
    assert not result.truncated
