"""Statements that would keep SQLite compiling for minutes (WITH queries or views named many times over,
nested) are refused before SQLite sees them; ordinary WITH queries and views are not."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.expansion import COPY_LIMIT, copied_tokens, view_definition
from safedb.errors import InvalidStatement

pytestmark = pytest.mark.anyio


def nested_with(levels: int, hint: str = "") -> str:
    """Each WITH query names the one before three times: SQLite copies 3**levels of the first."""
    queries = ["a0(x) AS (SELECT 1)"] + [
        f"a{n}(x) AS {hint} (SELECT 1 FROM a{n - 1} AS p, a{n - 1} AS q, a{n - 1} AS r)" for n in range(1, levels + 1)
    ]
    return f"WITH {', '.join(queries)} SELECT count(*) FROM a{levels}"


def view_of_nested_with(name: str, base: str, levels: int) -> str:
    """A view whose WITH queries each name the one before three times, the first reading `base`."""
    arms = lambda query: " UNION ALL ".join([f"SELECT x FROM {query}"] * 3)  # noqa: E731
    queries = [f"q0 AS (SELECT x FROM {base})"] + [f"q{n} AS ({arms(f'q{n - 1}')})" for n in range(1, levels + 1)]
    return f"CREATE VIEW {name} AS WITH {', '.join(queries)} SELECT x FROM q{levels}"


@pytest.fixture
async def database(database_file: Path):
    connection = sqlite3.connect(database_file)
    # Views are not compiled when created; SQLite copies them in when a statement names them. (Past eight
    # levels, merely listing the tables with `pragma_table_list` takes seconds.)
    connection.execute("CREATE VIEW v0 AS SELECT 1 AS x")
    for level in range(1, 8):
        connection.execute(f"CREATE VIEW v{level} AS SELECT 1 AS x FROM v{level - 1} p, v{level - 1} q, v{level - 1} r")
    connection.execute(view_of_nested_with("w0", "(SELECT 1 AS x)", 5))
    connection.execute(view_of_nested_with("w1", "w0", 3))
    connection.commit()
    connection.close()
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=2))
    yield database
    await database.aclose()


@pytest.mark.parametrize("hint", ["", "MATERIALIZED", "NOT MATERIALIZED"])
async def test_with_queries_named_many_times_over_are_refused_before_sqlite_compiles_them(
    database: SqliteDatabase, hint: str
) -> None:
    # Twelve levels: half a million copies, minutes of compiling on the event loop without the check.
    with pytest.raises(InvalidStatement, match="names its WITH queries or views so many times over"):
        await database.classify(nested_with(12, hint))


async def test_views_named_many_times_over_are_refused_too(database: SqliteDatabase) -> None:
    with pytest.raises(InvalidStatement, match="so many times over"):
        await database.classify("SELECT count(*) FROM v7")
    with pytest.raises(InvalidStatement, match="so many times over"):
        await database.classify("WITH w AS (SELECT * FROM v5, v5 AS b) SELECT * FROM w, w AS c")


async def test_views_of_with_queries_named_many_times_over_are_refused_too(database: SqliteDatabase) -> None:
    """A view counted by its text alone, not by the copies of its own WITH queries: `SELECT * FROM w2` (w2 made
    like w1, over it) compiled for 6 s, and `describe_table` of it filled SQLite's memory limit."""
    with pytest.raises(InvalidStatement, match="so many times over"):
        await database.classify("SELECT * FROM w1")
    with pytest.raises(InvalidStatement, match="so many times over"):
        await database.classify(view_of_nested_with("w2", "w1", 3))
    with pytest.raises(InvalidStatement, match="cannot describe the view 'w1'"):
        await database.describe_table("w1")
    assert (await database.classify("SELECT * FROM w0")).read_only
    description = await database.describe_table("w0")
    assert description is not None
    assert [column.name for column in description.columns] == ["x"]


async def test_ordinary_with_queries_and_views_are_classified_as_before(database: SqliteDatabase) -> None:
    assert (await database.classify(nested_with(3))).read_only
    assert (await database.classify("SELECT count(*) FROM v2")).read_only
    recursive = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT * FROM n, n AS m"
    assert (await database.classify(recursive)).read_only
    deleting = await database.classify("WITH doomed AS (SELECT id FROM items) DELETE FROM items WHERE id IN doomed")
    assert not deleting.read_only


def test_the_count_grows_with_each_level_as_sqlite_s_work_does() -> None:
    counts = [copied_tokens(nested_with(levels), {}) for levels in range(1, 9)]
    below_limit = [count for count in counts if count <= COPY_LIMIT]
    assert len(below_limit) >= 5
    assert all(later > 2.5 * earlier for earlier, later in itertools.pairwise(below_limit))
    assert counts[-1] == COPY_LIMIT + 1  # capped just past the limit
    assert copied_tokens("SELECT 1", {}) == 0


def test_names_in_strings_and_comments_do_not_count_and_quoted_names_do() -> None:
    once = "WITH w AS (SELECT x FROM t) SELECT * FROM w"
    assert copied_tokens(once, {}) == 4  # the body's four tokens
    assert copied_tokens(once + " -- w w w\n /* w w */ WHERE 'w w' = 'w'", {}) == 4
    assert copied_tokens(once + ', "w" AS b, [W] AS c, `w` AS d', {}) == 16
    assert copied_tokens(once + ", w /* never closed", {}) == 8


def test_a_view_counts_with_what_it_names() -> None:
    views = {
        "base": view_definition("CREATE VIEW base AS SELECT 1 AS x"),
        "pair": view_definition("CREATE VIEW pair AS SELECT 1 FROM base, base AS b"),
    }
    single = copied_tokens("SELECT * FROM base", views)
    assert copied_tokens("SELECT * FROM pair", views) > 2 * single
    assert copied_tokens("SELECT * FROM unrelated", views) == 0


def test_a_long_chain_of_with_queries_is_counted_without_running_out_of_stack() -> None:
    def chain(length: int) -> str:
        queries = ["a0(x) AS (SELECT 1)"] + [f"a{n}(x) AS (SELECT x FROM a{n - 1})" for n in range(1, length)]
        return f"WITH {', '.join(queries)} SELECT * FROM a{length - 1}"

    assert copied_tokens(chain(100), {}) == 4 * 99 + 1  # each body once: a chain copies in line, not in a tree
    assert copied_tokens(chain(5000), {}) == COPY_LIMIT + 1
