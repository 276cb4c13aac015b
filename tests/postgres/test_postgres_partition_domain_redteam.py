"""Red team: expressions PostgreSQL runs that the question never judged. A partition's bounds (`CREATE TABLE ...
PARTITION OF ... FOR VALUES (...)`, `ATTACH PARTITION ... FOR VALUES (...)`) and a domain's new check (`ALTER DOMAIN
... ADD CONSTRAINT ... CHECK`) are evaluated as the statement runs, but their calls were not named, a server-file
function there was only asked about, and where schema changes run unasked, such a statement emptied a table with no
question. A `CREATE SCHEMA` with a `GRANT` inside it granted on any table as a mere schema change. And `DETACH
PARTITION ... CONCURRENTLY` was asked about, then always failed in the approved run's transaction.
"""

from __future__ import annotations

import pytest

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion, DeniedByPolicy, StatementRefused
from safedb.sql.classification import ChangeCategory
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

_FRESH = (
    "DROP TABLE IF EXISTS victim, listed, listed_x, listed_1, listed_2, ranged, ranged_1, valued CASCADE",
    "DROP DOMAIN IF EXISTS positive",
    "DROP FUNCTION IF EXISTS wipe(), bound()",
    "DROP SEQUENCE IF EXISTS moved",
    "CREATE TABLE victim (id integer)",
    "INSERT INTO victim SELECT generate_series(1, 3)",
    "CREATE FUNCTION wipe() RETURNS integer LANGUAGE plpgsql AS $$BEGIN DELETE FROM victim; RETURN 7; END$$",
    "CREATE FUNCTION bound() RETURNS integer LANGUAGE plpgsql AS $$BEGIN RETURN 7; END$$",
    "CREATE SEQUENCE moved",
    "CREATE TABLE listed (id integer) PARTITION BY LIST (id)",
    "CREATE TABLE listed_x (id integer)",
    "CREATE TABLE ranged (id integer) PARTITION BY RANGE (id)",
    "CREATE DOMAIN positive AS integer",
    "CREATE TABLE valued (v positive)",
    "INSERT INTO valued VALUES (1)",
)

# Each runs the call in it as PostgreSQL makes the partition or checks the domain's stored values.
RUNS_A_CALL = {
    "create-partition": "CREATE TABLE listed_1 PARTITION OF listed FOR VALUES IN ({call})",
    "range-partition": "CREATE TABLE ranged_1 PARTITION OF ranged FOR VALUES FROM (MINVALUE) TO ({call})",
    "attach-partition": "ALTER TABLE listed ATTACH PARTITION listed_x FOR VALUES IN ({call})",
    "domain-check": "ALTER DOMAIN positive ADD CONSTRAINT c CHECK (VALUE < {call})",
}


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_FRESH)
    return empty_pg


@pytest.mark.parametrize("case", list(RUNS_A_CALL))
async def test_the_question_names_the_calls_a_partition_bound_or_a_domain_check_runs(
    fresh: PgDatabase, case: str
) -> None:
    (wiping,) = await fresh.classifications(RUNS_A_CALL[case].format(call="wipe()"))
    (moving,) = await fresh.classifications(RUNS_A_CALL[case].format(call="nextval('moved')::int"))

    assert any(line.startswith("function call function wipe ") for line in wiping.change_lines), wiping.change_lines
    # Where schema changes run unasked, the call is still a change the policy asks about.
    assert ChangeCategory.UNKNOWN in wiping.categories
    assert any("sequence" in line and "moved" in line for line in moving.change_lines), moving.change_lines
    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]


@pytest.mark.parametrize("case", list(RUNS_A_CALL))
async def test_server_files_read_in_a_partition_bound_or_a_domain_check_are_refused(
    fresh: PgDatabase, case: str
) -> None:
    with pytest.raises(DeniedByPolicy, match="pg_read_file"):
        await fresh.classifications(RUNS_A_CALL[case].format(call="length(pg_read_file('/etc/hostname'))"))


@pytest.mark.parametrize("case", list(RUNS_A_CALL))
async def test_a_function_in_them_replaced_while_asking_does_not_run(fresh: PgDatabase, case: str) -> None:
    shown, impact = await fresh.asked(RUNS_A_CALL[case].format(call="bound()"))
    fresh.run_as_owner(
        "CREATE OR REPLACE FUNCTION bound() RETURNS integer LANGUAGE plpgsql "
        "AS $$BEGIN DELETE FROM victim; RETURN 7; END$$"
    )

    with pytest.raises(ChangedSinceQuestion):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]


@pytest.mark.parametrize("case", list(RUNS_A_CALL))
async def test_left_as_it_was_the_statement_runs(fresh: PgDatabase, case: str) -> None:
    shown, impact = await fresh.asked(RUNS_A_CALL[case].format(call="bound()"))

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]


async def test_validating_a_domain_check_judges_the_stored_code_of_every_table(fresh: PgDatabase) -> None:
    fresh.run_as_owner("ALTER DOMAIN positive ADD CONSTRAINT later CHECK (VALUE < wipe()) NOT VALID")

    (validating,) = await fresh.classifications("ALTER DOMAIN positive VALIDATE CONSTRAINT later")

    lines = validating.change_lines
    assert any(line.startswith("function call function public.wipe ") for line in lines), lines


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE SCHEMA granted GRANT ALL ON TABLE public.victim TO PUBLIC",
        "CREATE SCHEMA made CREATE TABLE t (id integer) CREATE VIEW v AS SELECT 1",
    ],
)
async def test_a_schema_made_with_statements_inside_it_is_refused(fresh: PgDatabase, sql: str) -> None:
    with pytest.raises(StatementRefused, match="exactly one per call"):
        await fresh.classifications(sql)


async def test_a_schema_made_alone_is_a_schema_change(fresh: PgDatabase) -> None:
    (made,) = await fresh.classifications("CREATE SCHEMA IF NOT EXISTS alone")

    assert made.categories == (ChangeCategory.SCHEMA,)


async def test_a_partition_detached_concurrently_is_detached_once_approved(fresh: PgDatabase) -> None:
    fresh.run_as_owner("CREATE TABLE listed_2 PARTITION OF listed FOR VALUES IN (2)")
    shown, impact = await fresh.asked("ALTER TABLE listed DETACH PARTITION listed_2 CONCURRENTLY")

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM pg_inherits WHERE inhrelid = 'listed_2'::regclass") == [(0,)]
