"""User-defined functions a statement runs without naming them: in constraints, domains, generated columns,
indexes, and operators. A dry run must not run them (a rollback does not undo a sequence, or a write made
through another connection), and a read must not call a volatile one unasked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from safedb.sql.classification import ChangeKind
from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE SEQUENCE calls",
    # Declared IMMUTABLE, as such helpers often are, and still advancing a sequence: the label is not enforced.
    "CREATE FUNCTION counted(v integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM nextval('calls'); RETURN true; END $$",
    "CREATE FUNCTION counted_value(v integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM nextval('calls'); RETURN v; END $$",
    "CREATE TABLE checked (id integer PRIMARY KEY, v integer CHECK (counted(v)))",
    "CREATE DOMAIN counted_int AS integer CHECK (counted(VALUE))",
    "CREATE TABLE typed (id integer PRIMARY KEY, v counted_int)",
    "CREATE TABLE generated (id integer PRIMARY KEY, v integer, "
    "g integer GENERATED ALWAYS AS (counted_value(v)) STORED)",
    "CREATE TABLE indexed (id integer PRIMARY KEY, v integer)",
    "CREATE INDEX indexed_by_count ON indexed (counted_value(v))",
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO checked VALUES (1, 1)",
    "INSERT INTO typed VALUES (1, 1)",
    "INSERT INTO generated (id, v) VALUES (1, 1)",
    "INSERT INTO indexed VALUES (1, 1)",
    "INSERT INTO plain VALUES (1, 1)",
    "CREATE FUNCTION counted_eq(a integer, b integer) RETURNS boolean LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM nextval('calls'); RETURN a = b; END $$",
    "CREATE OPERATOR === (LEFTARG = integer, RIGHTARG = integer, FUNCTION = counted_eq)",
    # PostgreSQL 15 reads json_scalar(...) as a call to this function; PostgreSQL 17's grammar, as SQL/JSON.
    "CREATE FUNCTION json_scalar(v integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM nextval('calls'); RETURN v; END $$",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE checked SET v = v + 1",
        "INSERT INTO checked VALUES (2, 2)",
        "INSERT INTO typed VALUES (2, 2)",
        "UPDATE typed SET v = 5",
        "UPDATE generated SET v = v + 1",
        "UPDATE indexed SET v = v + 1",
        "DELETE FROM plain WHERE id === ANY (SELECT 1)",
    ],
)
async def test_a_preview_never_runs_user_code_the_statement_does_not_name(pg: PgDatabase, sql: str) -> None:
    before = pg.rows("SELECT last_value, is_called FROM calls")

    (impact,) = await pg.previews(sql)

    assert pg.rows("SELECT last_value, is_called FROM calls") == before
    assert impact.rows_affected is None


async def test_the_preview_says_why_it_made_neither_a_dry_run_nor_an_estimate(pg: PgDatabase) -> None:
    (impact,) = await pg.previews("UPDATE checked SET v = v + 1")

    assert "no dry run and no planner's estimate" in impact.lines[0]
    assert "call the user-defined function counted" in impact.lines[0]


async def test_a_user_function_in_a_tables_code_rules_out_the_planner_even_for_a_delete(pg: PgDatabase) -> None:
    """A DELETE writes no rows, but planning it folds what the table's indexes and constraints call with
    constant arguments, and a user function's IMMUTABLE label is not enforced."""
    (impact,) = await pg.previews("DELETE FROM indexed WHERE id = 42")

    assert impact.rows_affected is None
    assert "planning may call the user-defined function counted_value" in impact.lines[0]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 WHERE 1 === ANY (SELECT 1)",
        "SELECT 1 WHERE 1 === ALL (SELECT 1)",
        "SELECT v FROM plain ORDER BY v USING ===",
    ],
)
async def test_an_operator_applied_to_a_subquery_or_a_sort_is_judged_by_its_function(pg: PgDatabase, sql: str) -> None:
    (classification,) = await pg.classifications(sql)

    assert ChangeKind.FUNCTION_CALL in classification.kinds


async def test_a_user_function_named_like_sql_json_is_judged_as_a_call(pg: PgDatabase) -> None:
    before = pg.rows("SELECT last_value, is_called FROM calls")
    database = pg.open()
    try:
        read = await database.classify("SELECT json_scalar(1)")
        impact = await database.preview(await database.classify("DELETE FROM plain WHERE json_scalar(id) = 1"))
    finally:
        await database.aclose()

    assert ChangeKind.FUNCTION_CALL in read.kinds
    assert pg.rows("SELECT last_value, is_called FROM calls") == before  # the dry run did not call it
    assert impact.rows_affected is None


async def test_sql_json_syntax_with_no_function_of_its_name_is_not_an_unknown_call(pg: PgDatabase) -> None:
    (classification,) = await pg.classifications(
        "SELECT json_array(1, 2), json_objectagg(k: v) FROM (VALUES ('a', 1)) AS t (k, v)"
    )

    assert classification.read_only
