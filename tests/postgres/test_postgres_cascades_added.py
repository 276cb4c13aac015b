"""Red team: objects made while a person decides on a change that cascades.

The question lists what a `DROP ... CASCADE` takes with it (from a dry run PostgreSQL rolls back), and the tables
foreign keys carry a DELETE, an UPDATE or a TRUNCATE to (from the catalog). The approved run went by the database
as it was by then: a view created meanwhile over the table, a table created meanwhile in the schema dropped, went
with the DROP; a table created meanwhile with a foreign key that cascades was emptied by `TRUNCATE ... CASCADE`, or
had its rows deleted or changed by the DELETE or UPDATE, though nobody was asked about any of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion
from tests.postgres.conftest import ChangesWhileDeciding, PgDatabase

pytestmark = pytest.mark.anyio

_FRESH = (
    "DROP SCHEMA IF EXISTS scratch CASCADE",
    "DROP TABLE IF EXISTS items, refs, parted, kid CASCADE",
    "CREATE TABLE items (id integer PRIMARY KEY, label text)",
    "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
    "CREATE VIEW seen_v AS SELECT id FROM items",
    "CREATE SCHEMA scratch",
    "CREATE TABLE scratch.seen (id integer)",
    "CREATE TABLE parted (id integer) PARTITION BY RANGE (id)",
    "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (3)",
    "INSERT INTO parted VALUES (1)",
    "CREATE TABLE kid (id integer)",
    "INSERT INTO kid VALUES (3), (5)",
)

# The DROP, what is made meanwhile, and what the DROP takes (its question shows all but the first).
MADE_MEANWHILE = {
    "a-view-over-the-table": (
        "DROP TABLE items CASCADE",
        "CREATE VIEW unseen_v AS SELECT label FROM items",
        {("public", "items"), ("public", "seen_v")},
    ),
    "a-table-in-the-schema": (
        "DROP SCHEMA scratch CASCADE",
        "CREATE TABLE scratch.unseen (id integer)",
        {("scratch", "seen")},
    ),
}


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_FRESH)
    return empty_pg


def _relations(pg: PgDatabase) -> list[tuple[object, ...]]:
    return pg.rows(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname IN ('public', 'scratch') AND c.relkind IN ('r', 'v') ORDER BY 1, 2"
    )


@pytest.mark.parametrize("case", list(MADE_MEANWHILE))
async def test_what_a_drop_would_take_besides_since_the_question_stops_it(fresh: PgDatabase, case: str) -> None:
    sql, made, _ = MADE_MEANWHILE[case]
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(made)  # while a person decides
    before = _relations(fresh)

    with pytest.raises(ChangedSinceQuestion, match="unseen"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert impact.drops is not None, impact.lines
    assert not any("unseen" in drop for drop in impact.drops), impact.drops
    assert _relations(fresh) == before  # rolled back: nothing dropped


@pytest.mark.parametrize("case", list(MADE_MEANWHILE))
async def test_a_drop_takes_what_its_question_showed(fresh: PgDatabase, case: str) -> None:
    sql, _, taken = MADE_MEANWHILE[case]
    before = set(_relations(fresh))
    shown, impact = await fresh.asked(sql)

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert impact.drops, impact.lines
    assert set(_relations(fresh)) == before - taken


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_view_made_while_asking_is_not_dropped(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """The approval holds for what the question showed, in either era (on 2026-07-28 it travels in the ticket)."""
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=(MADE_MEANWHILE["a-view-over-the-table"][1],))
    result, decisions = await fresh.call_execute_query(
        "DROP TABLE items CASCADE", tmp_path / "audit.db", responder, mode
    )

    assert "It also drops: view seen_v." in responder.asked[0].message, responder.asked[0].message
    assert "executed" not in decisions, decisions
    assert result.is_error, result
    assert "unseen_v" in "".join(getattr(block, "text", "") for block in result.content)
    assert ("public", "unseen_v") in _relations(fresh)
    assert ("public", "items") in _relations(fresh)


# A table whose foreign key cascades every change of items, made while a person decides.
_REFERENCING = (
    "CREATE TABLE refs (item integer REFERENCES items ON DELETE CASCADE ON UPDATE CASCADE)",
    "INSERT INTO refs VALUES (1), (2)",
)


@pytest.mark.parametrize(
    "sql",
    ["TRUNCATE items CASCADE", "DELETE FROM items WHERE id = 1", "UPDATE items SET id = 10 WHERE id = 1"],
)
async def test_a_foreign_key_made_while_asking_does_not_carry_the_change(fresh: PgDatabase, sql: str) -> None:
    """Counted or not: the count binds the rows of the table the statement names, not those a key's action changes."""
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(*_REFERENCING)

    with pytest.raises(ChangedSinceQuestion, match="refs"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert not any("refs" in line for line in impact.lines), impact.lines
    assert fresh.rows("SELECT item FROM refs ORDER BY 1") == [(1,), (2,)]
    assert fresh.rows("SELECT id FROM items ORDER BY 1") == [(1,), (2,)]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_foreign_key_made_while_asking_empties_nothing(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """Refused when the approved statement runs (legacy era), or asked again, naming refs (2026-07-28)."""
    responder = ChangesWhileDeciding(pg=fresh, meanwhile=_REFERENCING)
    result, decisions = await fresh.call_execute_query("TRUNCATE items CASCADE", tmp_path / "audit.db", responder, mode)

    assert "executed" not in decisions, decisions
    assert result.is_error or "refs" in responder.asked[-1].message, result
    assert fresh.rows("SELECT item FROM refs ORDER BY 1") == [(1,), (2,)]


# A table made part of another while a person decides: it then goes with a TRUNCATE or DROP of that table.
JOINED_MEANWHILE = {
    "truncate-an-inheritance-parent": (
        "TRUNCATE items",
        "ALTER TABLE kid ADD COLUMN label text; ALTER TABLE kid ALTER COLUMN id SET NOT NULL; "
        "ALTER TABLE kid INHERIT items",
    ),
    "truncate-a-partitioned-table": (
        "TRUNCATE parted",
        "ALTER TABLE parted ATTACH PARTITION kid FOR VALUES FROM (3) TO (9)",
    ),
    "drop-a-partitioned-table": (
        "DROP TABLE parted",
        "ALTER TABLE parted ATTACH PARTITION kid FOR VALUES FROM (3) TO (9)",
    ),
}


@pytest.mark.parametrize("case", list(JOINED_MEANWHILE))
async def test_a_table_joined_to_the_one_emptied_or_dropped_while_asking_is_left_alone(
    fresh: PgDatabase, case: str
) -> None:
    sql, joined = JOINED_MEANWHILE[case]
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(*joined.split("; "))

    with pytest.raises(ChangedSinceQuestion, match="kid"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected, drops=impact.drops))

    assert not any("kid" in line for line in impact.lines), impact.lines
    assert fresh.rows("SELECT id FROM kid ORDER BY 1") == [(3,), (5,)]


async def test_the_question_names_the_partitions_a_truncate_empties_and_a_drop_drops(fresh: PgDatabase) -> None:
    (_, truncate), (_, drop) = [await fresh.asked(sql) for sql in ("TRUNCATE parted", "DROP TABLE parted")]
    assert any(line.endswith("or are its partitions: parted_low.") for line in truncate.lines), truncate.lines
    assert "It also drops its partitions: parted_low." in drop.lines, drop.lines
