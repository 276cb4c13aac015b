"""Red team: code added to a table's defaults, constraints or indexes while a person decides on a data change.

A question with no dry run's count (the table has a trigger: only the planner's estimate) approves the statement,
not a number of rows. Its approved run checked the triggers, but not the stored code PostgreSQL runs with each row
written: a default, a CHECK constraint, an index expression or a generated column added meanwhile (or a function
one of them calls replaced) ran code nobody was asked about, with the statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from safedb.errors import ChangedSinceQuestion
from tests.postgres.conftest import ChangesWhileDeciding, PgDatabase, database_with
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE TABLE history (id integer)",
    "CREATE SEQUENCE stamps",
    "CREATE FUNCTION poke() RETURNS integer LANGUAGE sql VOLATILE AS $$ INSERT INTO history VALUES (42) RETURNING 1 $$",
    # Labelled immutable, as an index expression or a generated column needs; its label is not enforced.
    "CREATE FUNCTION stamp(integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM nextval('stamps'); RETURN 0; END $$",
    "CREATE FUNCTION label_for(integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'n' || $1 $$",
    "CREATE FUNCTION noted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN coalesce(new, old); END $$",
)

_FRESH = (
    "DROP TABLE IF EXISTS items",
    "CREATE OR REPLACE FUNCTION label_for(integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'n' || $1 $$",
    "CREATE TABLE items (id integer PRIMARY KEY, label text, note text DEFAULT label_for(0))",
    "INSERT INTO items (id, label) VALUES (1, 'a'), (2, 'b')",
    # A trigger: no dry run, so the question shows the planner's estimate and the approval holds no count.
    "CREATE TRIGGER items_noted BEFORE INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION noted()",
)

ADDED = {
    "default": "ALTER TABLE items ALTER COLUMN label SET DEFAULT (poke()::text)",
    "check-constraint": "ALTER TABLE items ADD CONSTRAINT poked CHECK (poke() > 0) NOT VALID",
    "index-expression": "CREATE INDEX items_stamped ON items ((id + stamp(id)))",
    "generated-column": "ALTER TABLE items ADD COLUMN stamped integer GENERATED ALWAYS AS (stamp(id)) STORED",
    "default-function-replaced": "CREATE OR REPLACE FUNCTION label_for(integer) RETURNS text LANGUAGE sql IMMUTABLE "
    "AS $$ SELECT 'n' || nextval('stamps') $$",
}


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


@pytest.fixture
def fresh(pg: PgDatabase) -> PgDatabase:
    pg.run_as_owner(*_FRESH)
    return pg


def _effects(pg: PgDatabase) -> list[object]:
    """What the added code's functions leave behind: rows in history, a sequence moved."""
    return [pg.rows("SELECT count(*) FROM history"), pg.rows("SELECT last_value, is_called FROM stamps")]


@pytest.mark.parametrize("added", list(ADDED))
async def test_code_added_to_the_table_while_asking_does_not_run(fresh: PgDatabase, added: str) -> None:
    shown, impact = await fresh.asked("INSERT INTO items (id) VALUES (7)")
    fresh.run_as_owner(ADDED[added])  # while a person decides
    before = _effects(fresh)

    with pytest.raises(ChangedSinceQuestion, match=r"poke|stamp|label_for"):
        await fresh.run_approved(shown)

    assert impact.rows_affected is None, impact.lines  # no count held the approval to anything
    assert _effects(fresh) == before
    assert fresh.rows("SELECT id FROM items ORDER BY id") == [(1,), (2,)]


async def test_an_approved_insert_into_an_unchanged_table_runs(fresh: PgDatabase) -> None:
    """Its own default's function (user-defined, harmless) was there when asked: it runs."""
    shown, _ = await fresh.asked("INSERT INTO items (id) VALUES (7)")

    await fresh.run_approved(shown)

    assert fresh.rows("SELECT id, note FROM items WHERE id = 7") == [(7, "n0")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_default_added_while_asking_changes_nothing(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """Refused when the approved statement runs (legacy era), or asked again, naming the new code (2026-07-28)."""
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=(ADDED["default"],))
    result, decisions = await fresh.call_execute_query(
        "INSERT INTO items (id) VALUES (7)", tmp_path / "audit.db", responder, mode
    )

    assert "executed" not in decisions, decisions
    assert result.is_error or "poke" in responder.asked[-1].message, result
    assert fresh.rows("SELECT count(*) FROM history") == [(0,)]
    assert fresh.rows("SELECT id FROM items ORDER BY id") == [(1,), (2,)]
