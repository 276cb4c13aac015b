"""Red team: an approval bound the definitions of the functions, procedures and trigger functions a statement names,
not of the code those call in turn. A helper function replaced while a person decided (to delete every row of a
table) ran its new code through a function calling it, a procedure, a trigger function and a DO block, all approved
as they were shown. Now an approval of a statement that runs code created in the database holds only while no
function or procedure there is created, replaced or dropped (`Classification.code_version`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion
from tests.postgres.conftest import ChangesWhileDeciding, PgDatabase

pytestmark = pytest.mark.anyio

_FRESH = (
    "DROP TABLE IF EXISTS victim, inbox CASCADE",
    "DROP PROCEDURE IF EXISTS ptidy()",
    "DROP FUNCTION IF EXISTS outer_tidy(), inbox_trg(), tidy(), unrelated()",
    "CREATE TABLE victim (id integer)",
    "INSERT INTO victim SELECT generate_series(1, 3)",
    "CREATE TABLE inbox (id integer)",
    "CREATE FUNCTION tidy() RETURNS integer LANGUAGE plpgsql AS $$BEGIN RETURN 0; END$$",
    "CREATE FUNCTION outer_tidy() RETURNS integer LANGUAGE plpgsql AS $$BEGIN RETURN tidy(); END$$",
    "CREATE PROCEDURE ptidy() LANGUAGE plpgsql AS $$BEGIN PERFORM tidy(); END$$",
    "CREATE FUNCTION inbox_trg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM tidy(); RETURN NEW; END$$",
    "CREATE TRIGGER inbox_after AFTER INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION inbox_trg()",
)
REPLACED = (
    "CREATE OR REPLACE FUNCTION tidy() RETURNS integer LANGUAGE plpgsql AS $$BEGIN DELETE FROM victim; RETURN 0; END$$"
)

# Each runs tidy() only through code it names (or, for DO, through its own text).
THROUGH = {
    "a-function-calling-it": "SELECT outer_tidy()",
    "a-procedure": "CALL ptidy()",
    "a-trigger-function": "INSERT INTO inbox VALUES (1)",
    "a-do-block": "DO $$ BEGIN PERFORM tidy(); END $$",
}


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_FRESH)
    return empty_pg


@pytest.mark.parametrize("case", list(THROUGH))
async def test_code_called_by_the_code_shown_replaced_while_asking_does_not_run(fresh: PgDatabase, case: str) -> None:
    shown, impact = await fresh.asked(THROUGH[case])
    fresh.run_as_owner(REPLACED)

    with pytest.raises(ChangedSinceQuestion, match="created, replaced or dropped meanwhile"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]


@pytest.mark.parametrize("case", list(THROUGH))
async def test_code_left_as_it_was_runs(fresh: PgDatabase, case: str) -> None:
    shown, impact = await fresh.asked(THROUGH[case])
    fresh.run_as_owner("CREATE TABLE IF NOT EXISTS unrelated_table (id integer)")  # no function or procedure

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert shown.code_version is not None
    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]


async def test_a_statement_that_runs_no_code_of_the_database_is_not_bound_to_it(fresh: PgDatabase) -> None:
    shown, impact = await fresh.asked("DELETE FROM victim WHERE id = 1")
    fresh.run_as_owner("CREATE FUNCTION unrelated() RETURNS integer LANGUAGE sql AS 'SELECT 1'")

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert shown.code_version is None
    assert fresh.rows("SELECT count(*) FROM victim") == [(2,)]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_helper_replaced_while_asking_does_not_run(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=(REPLACED,))
    result, decisions = await fresh.call_execute_query("CALL ptidy()", tmp_path / "audit.db", responder, mode)

    assert "executed" not in decisions, decisions
    assert result.is_error or len(responder.asked) > 1, result  # stopped, or (2026-07-28) asked again and declined
    assert fresh.rows("SELECT count(*) FROM victim") == [(3,)]
