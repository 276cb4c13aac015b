"""Built-in functions with effects a rollback does not undo, reached through stored code: constraints,
column and domain defaults, domains at any depth, and casts in the statement. A preview must not run them
(a sequence moves, another session ends), and neither may planning it: the planner folds functions
labelled immutable, and a user-defined function's label is not enforced."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from safedb.sql.classification import ChangeKind
from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import WRITER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE SEQUENCE moved START 100",
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 1), (7, 7)",
    "CREATE TABLE checked_builtin (v integer CHECK (setval('moved', 1, false) > 0))",
    "CREATE TABLE defaulted_builtin (v integer, w bigint DEFAULT setval('moved', 1, false))",
    "CREATE DOMAIN drawn AS bigint DEFAULT nextval('moved')",
    "CREATE TABLE domain_defaulted (id drawn, v text)",
    "CREATE DOMAIN drawing AS integer CHECK (nextval('moved') > 0)",
    "CREATE TABLE domain_checked (v drawing)",
    "CREATE FUNCTION bump() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('moved'); RETURN true; END $$",
    "CREATE DOMAIN bumped_1 AS integer CHECK (bump())",
    "CREATE DOMAIN bumped_2 AS bumped_1",
    "CREATE DOMAIN bumped_3 AS bumped_2",
    "CREATE TABLE nested (v bumped_3[])",
    "CREATE DOMAIN resetting AS integer CHECK (setval('moved', VALUE, false) > 0)",
    "CREATE DOMAIN ending AS integer CHECK (pg_terminate_backend(VALUE))",
    # Labelled IMMUTABLE, so the planner folds a call with constant arguments, running it.
    "CREATE FUNCTION end_session(p integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM pg_terminate_backend(p); RETURN p; END $$",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.fixture
def victim(pg: PgDatabase) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session of the writer's role, which the writer may end."""
    with pg.server.connect(pg.name, WRITER) as connection:
        yield connection


def _alive(pg: PgDatabase, pid: int) -> bool:
    return pg.rows(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == [(1,)]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO checked_builtin VALUES (1)",
        "INSERT INTO defaulted_builtin (v) VALUES (1)",
        "INSERT INTO domain_defaulted (v) VALUES ('a')",
        "INSERT INTO domain_checked VALUES (5)",
        "INSERT INTO nested VALUES (ARRAY[1])",
        "DELETE FROM plain WHERE id = 7::resetting",
        "DELETE FROM plain WHERE id = CAST(7 AS resetting)",
        "DELETE FROM plain WHERE id = resetting(7)",
    ],
)
async def test_a_preview_never_moves_a_sequence_through_stored_code(pg: PgDatabase, sql: str) -> None:
    before = pg.rows("SELECT last_value, is_called FROM moved")

    (impact,) = await pg.previews(sql)

    assert pg.rows("SELECT last_value, is_called FROM moved") == before
    assert impact.rows_affected is None


async def test_a_cast_to_a_domain_is_judged_by_the_functions_its_checks_call(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        resetting = await database.classify("SELECT 7::resetting")
        ending = await database.classify("SELECT 0::ending")
        nested = await database.classify("SELECT ARRAY[1]::bumped_3[]")
    finally:
        await database.aclose()

    assert ChangeKind.SEQUENCE in resetting.kinds
    assert ChangeKind.FUNCTION_CALL in ending.kinds
    assert ChangeKind.FUNCTION_CALL in nested.kinds


async def test_a_preview_never_ends_another_session_through_a_domain(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews(f"DELETE FROM plain WHERE id = {victim.info.backend_pid}::ending")

    assert _alive(pg, victim.info.backend_pid)
    assert impact.rows_affected is None


async def test_the_planner_is_not_asked_when_it_may_run_a_user_function(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews(f"DELETE FROM plain WHERE id = end_session({victim.info.backend_pid})")

    assert _alive(pg, victim.info.backend_pid)
    assert impact.rows_affected is None
    assert "no dry run and no planner's estimate" in impact.lines[0]
    assert "end_session" in impact.lines[0]


async def test_a_sequence_in_a_default_still_gets_the_planners_estimate(pg: PgDatabase) -> None:
    """`nextval` is volatile: the planner never runs it, so an estimate is safe where a dry run is not."""
    (impact,) = await pg.previews("INSERT INTO domain_defaulted (v) SELECT 'x' FROM generate_series(1, 3)")

    assert "by the planner's estimate; no dry run" in impact.lines[0]
    assert "moves a sequence" in impact.lines[0]


async def test_functions_of_an_installed_extension_are_trusted_by_their_label(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE EXTENSION IF NOT EXISTS citext",
        "CREATE TABLE tagged (id integer PRIMARY KEY, tag citext CHECK (tag <> 'forbidden'::citext))",
        "INSERT INTO tagged VALUES (1, 'a'), (2, 'b')",
    )

    update, delete = await pg.previews("UPDATE tagged SET tag = upper(tag::text)", "DELETE FROM tagged WHERE id = 1")

    assert (update.rows_affected, delete.rows_affected) == (2, 1)
    assert pg.rows("SELECT tag::text FROM tagged ORDER BY id") == [("a",), ("b",)]
