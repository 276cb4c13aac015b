"""Red team: what a name means while a person decides, and which code a call runs.

An approval held for names, not for what they meant: two tables swapping names while a person decided (`ALTER TABLE
... RENAME`) had the approved TRUNCATE, DELETE or DROP change the other table, and a sequence renamed over another
had `setval` move that one. A function named like a built-in with effects (`setval`, `nextval`, `pg_advisory_lock`,
`lo_unlink`) was taken for the built-in, though a closer match of the argument types makes PostgreSQL call the user's
function: it ran unseen, also when made while a person decided. A volatile function or a procedure replaced while
a person decided ran its new code under the approval of the old, since the question named it only by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion
from tests.postgres.conftest import ChangesWhileDeciding, PgDatabase

pytestmark = pytest.mark.anyio

_FRESH = (
    "DROP TABLE IF EXISTS small, big, small_old, precious CASCADE",
    "DROP SEQUENCE IF EXISTS harmless_seq, items_seq, items_seq_old",
    "DROP FUNCTION IF EXISTS public.setval(text, integer), public.nextval(text), bump()",
    "DROP PROCEDURE IF EXISTS tidy()",
    "CREATE TABLE small (id integer)",
    "INSERT INTO small VALUES (1)",
    "CREATE TABLE big (id integer)",
    "INSERT INTO big SELECT generate_series(1, 100)",
    "CREATE TABLE precious (id integer)",
    "INSERT INTO precious SELECT generate_series(1, 50)",
    "CREATE SEQUENCE harmless_seq",
    "CREATE SEQUENCE items_seq START 1000",
    "SELECT nextval('items_seq')",
    "CREATE FUNCTION bump() RETURNS integer LANGUAGE sql AS 'INSERT INTO precious VALUES (0) RETURNING id'",
    "CREATE PROCEDURE tidy() LANGUAGE sql AS 'DELETE FROM precious WHERE id > 50'",
)

# Each name's table is swapped with another of the same size or not, while a person decides.
_SWAP_TABLES = "ALTER TABLE small RENAME TO small_old; ALTER TABLE big RENAME TO small"


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_FRESH)
    return empty_pg


def _counts(pg: PgDatabase) -> dict[str, int]:
    names = [name for (name,) in pg.rows("SELECT relname FROM pg_class WHERE relname IN ('small', 'big', 'small_old')")]
    return {name: pg.rows(f"SELECT count(*) FROM {name}")[0][0] for name in sorted(names)}


@pytest.mark.parametrize(
    "sql", ["TRUNCATE small", "DELETE FROM small WHERE id = 1", "DROP TABLE small", "UPDATE small SET id = 2"]
)
async def test_tables_that_swap_names_while_asking_are_left_alone(fresh: PgDatabase, sql: str) -> None:
    """The DELETE and UPDATE would change one row of either table: the count cannot tell them apart."""
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(*_SWAP_TABLES.split("; "))
    before = _counts(fresh)

    with pytest.raises(ChangedSinceQuestion, match="now means"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert _counts(fresh) == before == {"small": 100, "small_old": 1}
    assert fresh.rows("SELECT count(*) FROM small WHERE id = 1") == [(1,)]


async def test_a_table_dropped_and_made_again_while_asking_is_another_table(fresh: PgDatabase) -> None:
    shown, impact = await fresh.asked("TRUNCATE small")
    fresh.run_as_owner("DROP TABLE small", "CREATE TABLE small (id integer)", "INSERT INTO small VALUES (7), (8)")

    with pytest.raises(ChangedSinceQuestion, match="now means"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert fresh.rows("SELECT id FROM small ORDER BY 1") == [(7,), (8,)]


async def test_a_sequence_renamed_over_the_one_asked_about_is_not_moved(fresh: PgDatabase) -> None:
    shown, impact = await fresh.asked("SELECT setval('harmless_seq', 1)")
    fresh.run_as_owner(
        "ALTER SEQUENCE harmless_seq RENAME TO items_seq_old", "ALTER SEQUENCE items_seq RENAME TO harmless_seq"
    )

    with pytest.raises(ChangedSinceQuestion, match="now means"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT last_value FROM harmless_seq") == [(1000,)]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_tables_swapped_while_asking_are_not_emptied(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """Refused when the approved statement runs (legacy era), or asked again (2026-07-28: the ticket binds it)."""
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=tuple(_SWAP_TABLES.split("; ")))
    result, decisions = await fresh.call_execute_query("TRUNCATE small", tmp_path / "audit.db", responder, mode)

    assert "executed" not in decisions, decisions
    assert result.is_error or len(responder.asked) > 1, result
    assert _counts(fresh) == {"small": 100, "small_old": 1}


# A function of a built-in's name with effects of its own, which PostgreSQL calls for the statement's arguments.
NAMED_LIKE_BUILT_INS = {
    "setval": (
        "SELECT setval('harmless_seq', 42)",
        "CREATE FUNCTION public.setval(text, integer) RETURNS bigint LANGUAGE sql AS "
        "'DELETE FROM precious; SELECT 0::bigint'",
    ),
    "nextval": (
        "SELECT nextval('harmless_seq')",
        "CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE sql AS 'DELETE FROM precious; SELECT 0::bigint'",
    ),
}


@pytest.mark.parametrize("case", list(NAMED_LIKE_BUILT_INS))
async def test_a_function_named_like_a_built_in_is_judged_as_itself(fresh: PgDatabase, case: str) -> None:
    sql, made = NAMED_LIKE_BUILT_INS[case]
    fresh.run_as_owner(made)

    shown, _ = await fresh.asked(sql)

    called = [change for change in shown.change_lines if change.startswith(f"function call function public.{case}")]
    assert called, shown.change_lines
    assert "volatile; definition " in called[0], called


@pytest.mark.parametrize("case", list(NAMED_LIKE_BUILT_INS))
async def test_a_function_named_like_a_built_in_made_while_asking_does_not_run(fresh: PgDatabase, case: str) -> None:
    sql, made = NAMED_LIKE_BUILT_INS[case]
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(made)

    with pytest.raises(ChangedSinceQuestion, match=f"public.{case}"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM precious") == [(50,)]


# Code the statement calls, replaced while a person decides: the new code would delete every row of precious.
REPLACED_MEANWHILE = {
    "a-volatile-function": (
        "SELECT bump()",
        "CREATE OR REPLACE FUNCTION bump() RETURNS integer LANGUAGE sql AS 'DELETE FROM precious RETURNING id'",
    ),
    "a-procedure": ("CALL tidy()", "CREATE OR REPLACE PROCEDURE tidy() LANGUAGE sql AS 'DELETE FROM precious'"),
}


@pytest.mark.parametrize("case", list(REPLACED_MEANWHILE))
async def test_code_replaced_while_asking_does_not_run(fresh: PgDatabase, case: str) -> None:
    sql, replaced = REPLACED_MEANWHILE[case]
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(replaced)

    with pytest.raises(ChangedSinceQuestion, match="definition"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert fresh.rows("SELECT count(*) FROM precious") == [(50,)]


@pytest.mark.parametrize("case", list(REPLACED_MEANWHILE))
async def test_code_left_as_it_was_runs(fresh: PgDatabase, case: str) -> None:
    sql, _ = REPLACED_MEANWHILE[case]
    shown, impact = await fresh.asked(sql)

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    # A function's fingerprint is in its call's line; a procedure's in the code the CALL runs.
    assert any("definition " in line for line in (*shown.change_lines, *shown.runs)), shown
    assert fresh.rows("SELECT count(*) FROM precious") == [(51,) if case == "a-volatile-function" else (50,)]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_procedure_replaced_while_asking_does_not_run(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=(REPLACED_MEANWHILE["a-procedure"][1],))
    result, decisions = await fresh.call_execute_query("CALL tidy()", tmp_path / "audit.db", responder, mode)

    assert "definition " in responder.asked[0].message, responder.asked[0].message
    assert "executed" not in decisions, decisions
    assert result.is_error or len(responder.asked) > 1, result
    assert fresh.rows("SELECT count(*) FROM precious") == [(50,)]
