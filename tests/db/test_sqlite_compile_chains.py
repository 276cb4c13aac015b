"""Red team, eleventh pass on SQLite: short statements that SQLite takes a second to compile, on the event loop.

SQLite copies an expression in place of every reference to it: a subquery's column into the query around it, a
WITH query's into the query naming it, a generated column's into every expression naming it. Statements nesting
subqueries up to four deep were compiled on the event loop, and a chain of WITH queries each naming the one before
counted as one level however long it was; so did a table's generated columns naming one another. Each of these,
under 500 characters, held the event loop for 0.3 to 1.3 s on every call (a refusal is not remembered).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.expansion import subquery_depth
from safedb.errors import InvalidStatement, QueryFailed, QueryTimeout
from tests.helpers import watching_the_loop

pytestmark = pytest.mark.anyio


def with_chain(levels: int, names: int) -> str:
    """WITH queries each naming the column of the one before `names` times."""
    queries = ["c0 AS (SELECT 1 AS a0)"] + [
        f"c{n} AS (SELECT {' + '.join([f'a{n - 1}'] * names)} AS a{n} FROM c{n - 1})" for n in range(1, levels + 1)
    ]
    return f"WITH {', '.join(queries)} SELECT a{levels} FROM c{levels}"


def nested(levels: int, names: int) -> str:
    """Subqueries in FROM, each naming the column of the one below `names` times."""
    query = "SELECT 1 AS a0"
    for n in range(1, levels + 1):
        query = f"SELECT {' + '.join([f'a{n - 1}'] * names)} AS a{n} FROM ({query})"
    return query


GENERATED = "CREATE TABLE g (c0 INTEGER, " + ", ".join(f"c{n} AS (c{n - 1} + c{n - 1})" for n in range(1, 26)) + ")"


@pytest.mark.parametrize(
    ("schema", "statement"),
    [
        ("", with_chain(5, 18)),
        ("", nested(4, 30)),
        (GENERATED, "SELECT c22 FROM g"),
        (f"{GENERATED}; CREATE VIEW gv AS SELECT c22 FROM g", "SELECT * FROM gv"),
    ],
    ids=["with-chain", "nested-four-deep", "generated-columns", "view-of-generated-columns"],
)
async def test_a_statement_copying_expressions_over_and_over_is_compiled_off_the_event_loop(
    database_file: Path, schema: str, statement: str
) -> None:
    with contextlib.closing(sqlite3.connect(database_file)) as connection:
        connection.executescript(schema)
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=5.0))

    async def classify() -> object:
        try:
            return await database.classify(statement)
        except (InvalidStatement, QueryFailed, QueryTimeout) as exc:  # refused or stopped: both fine
            return exc

    try:
        _, longest = await watching_the_loop(classify)
    finally:
        await database.aclose()
    assert longest < 0.25, f"the event loop was held up for {longest:.2f} s"


@pytest.mark.parametrize(
    ("statement", "depth"),
    [
        ("SELECT 1", 0),
        ("WITH a AS (SELECT 1 AS x) SELECT x FROM a", 1),
        ("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT x FROM b", 2),
        (with_chain(5, 1), 6),
        ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 3) SELECT x FROM r", 1),
        ("WITH a AS (SELECT 1 AS x), b AS (SELECT 2 AS x) SELECT x FROM a UNION ALL SELECT x FROM b", 1),
    ],
)
def test_a_chain_of_with_queries_counts_as_nested(statement: str, depth: int) -> None:
    assert subquery_depth(statement) == depth
