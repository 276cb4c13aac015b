"""Red team: changes made through PostgreSQL views (`DELETE FROM v`, `UPDATE v`, `INSERT INTO v`).

PostgreSQL makes a change of an automatically updatable view in the relation beneath it (through views of views,
down to a table), so that table's triggers, rules, foreign keys' actions and column defaults run with it. The
question asked about the view alone:

- it named none of the base table's triggers, cascades or defaults, and measured nothing (no dry run, no
  estimate: "it is not an ordinary table");
- the approved run did not check that the view still led to the table asked about: a view redefined (or a table
  replaced by a view of the same name) while the person decided changed another table, and a trigger added to the
  base table meanwhile ran unseen;
- nor that the functions the statement calls, itself or through the views it reads, were still those the question
  judged: a view redefined to call a function with effects, or a function redefined to have them, ran unseen.

Also: the code an INSTEAD OF trigger or an INSTEAD rule of the view runs, a view over a partitioned table, a view
PostgreSQL cannot change (a join), and MERGE into a view (PostgreSQL 17 and later only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion, QueryFailed
from safedb.sql.classification import Classification
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase, database_with
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE TABLE history (id integer)",
    "CREATE FUNCTION forget_history() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN DELETE FROM history; RETURN NULL; END $$",
    "CREATE FUNCTION forget_instead() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN DELETE FROM history; RETURN old; END $$",
    "CREATE FUNCTION noted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN coalesce(new, old); END $$",
    "CREATE SEQUENCE stamps",
    "CREATE FUNCTION next_stamp() RETURNS integer LANGUAGE sql AS $$ SELECT nextval('stamps')::integer $$",
)

# Dropped and made again before each test: the base table, the tables whose foreign keys act on it, another table
# of the same shape, and views of every sort over the base table.
_FRESH = (
    "DROP TABLE IF EXISTS items, parts, tags, other_items, parted, stamped CASCADE",
    # A test may have replaced the table `swapped` by a view of that name.
    "DO $$ BEGIN EXECUTE coalesce((SELECT CASE relkind WHEN 'v' THEN 'DROP VIEW swapped' ELSE 'DROP TABLE swapped' END "
    "FROM pg_class WHERE oid = to_regclass('swapped')), 'SELECT'); END $$",
    "CREATE TABLE items (id integer PRIMARY KEY, label text)",
    "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "CREATE TABLE parts (id integer, item integer REFERENCES items ON DELETE CASCADE)",
    "INSERT INTO parts VALUES (1, 1), (2, 1), (3, 2)",
    "CREATE TABLE tags (id integer, item integer REFERENCES items ON DELETE SET NULL)",
    "INSERT INTO tags VALUES (1, 3)",
    "CREATE TABLE other_items (id integer PRIMARY KEY, label text)",
    "INSERT INTO other_items VALUES (1, 'x'), (2, 'y'), (3, 'z')",
    "CREATE TABLE swapped (id integer, label text)",
    "INSERT INTO swapped VALUES (1, 's')",
    "CREATE VIEW items_v AS SELECT id, label FROM items",
    "CREATE VIEW items_vv AS SELECT id, label FROM items_v WHERE id > 0",
    "CREATE VIEW items_checked AS SELECT id, label FROM items WHERE id < 100 WITH CHECK OPTION",
    "CREATE VIEW items_barrier WITH (security_barrier) AS SELECT id, label FROM items WHERE id > 0",
    "CREATE VIEW items_invoker WITH (security_invoker = true) AS SELECT id, label FROM items",
    "CREATE VIEW items_joined AS SELECT i.id, p.id AS part FROM items i JOIN parts p ON p.item = i.id",
    "CREATE VIEW items_instead AS SELECT id, label FROM items",
    "CREATE TRIGGER items_instead_delete INSTEAD OF DELETE ON items_instead FOR EACH ROW "
    "EXECUTE FUNCTION forget_instead()",
    "CREATE VIEW items_ruled AS SELECT id, label FROM items",
    "CREATE RULE items_ruled_forget AS ON DELETE TO items_ruled DO INSTEAD DELETE FROM history",
    "CREATE VIEW items_conditional AS SELECT id, label FROM items",
    "CREATE RULE items_conditional_forget AS ON DELETE TO items_conditional WHERE old.id = 1 "
    "DO INSTEAD DELETE FROM history",
    "CREATE TABLE parted (id integer, v integer) PARTITION BY RANGE (id)",
    "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100)",
    "INSERT INTO parted VALUES (1, 1), (2, 2)",
    "CREATE TRIGGER parted_low_noted BEFORE DELETE ON parted_low FOR EACH ROW EXECUTE FUNCTION noted()",
    "CREATE VIEW parted_v AS SELECT id, v FROM parted",
    "CREATE TABLE stamped (id integer, label text, stamp integer DEFAULT next_stamp())",
    "CREATE VIEW stamped_v AS SELECT id, label FROM stamped",
    "DELETE FROM history",
    "INSERT INTO history VALUES (1), (2), (3)",
    "SELECT setval('stamps', 1, false)",
)
_BASE_TRIGGER = (
    "CREATE TRIGGER items_noted BEFORE INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION noted()"
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


@pytest.fixture
def fresh(pg: PgDatabase) -> PgDatabase:
    pg.run_as_owner(*_FRESH)
    return pg


def _state(pg: PgDatabase) -> dict[str, Any]:
    """Everything a change through these views could touch."""
    return {
        table: pg.rows(f"SELECT * FROM {table} ORDER BY 1")
        for table in ("items", "parts", "tags", "other_items", "history", "parted", "stamped")
    } | {"stamps": pg.rows("SELECT last_value, is_called FROM stamps")}


def _runs(classification: Classification) -> list[str]:
    return [name.split(" (")[0] for name in classification.runs]


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("DELETE FROM items_v WHERE id = 1", id="plain-view"),
        pytest.param("DELETE FROM items_vv WHERE id = 1", id="view-of-a-view"),
        pytest.param("DELETE FROM items_checked WHERE id = 1", id="with-check-option"),
        pytest.param("DELETE FROM items_barrier WHERE id = 1", id="security-barrier"),
        pytest.param("DELETE FROM items_invoker WHERE id = 1", id="security-invoker"),
        pytest.param("WITH gone AS (DELETE FROM items_v WHERE id = 1 RETURNING id) SELECT * FROM gone", id="in-a-with"),
    ],
)
async def test_the_question_of_a_delete_through_a_view_follows_it_to_its_table(fresh: PgDatabase, sql: str) -> None:
    fresh.run_as_owner(_BASE_TRIGGER)
    before = _state(fresh)

    classification, impact = await fresh.asked(sql)

    assert "table public.items" in [str(target) for target in classification.touched], classification.changes
    assert "trigger items_noted on items" in _runs(classification)
    assert "Foreign keys carry the delete on to: parts (CASCADE), tags (SET NULL)." in impact.lines, impact.lines
    assert _state(fresh) == before


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("UPDATE items_v SET label = 'u' WHERE id = 1", id="update"),
        pytest.param("INSERT INTO items_v (id, label) VALUES (10, 'j')", id="insert"),
        pytest.param("INSERT INTO items_v VALUES (1, 'j') ON CONFLICT (id) DO UPDATE SET label = 'k'", id="upsert"),
    ],
)
async def test_the_question_of_a_write_through_a_view_names_its_tables_triggers(fresh: PgDatabase, sql: str) -> None:
    fresh.run_as_owner(_BASE_TRIGGER)
    before = _state(fresh)

    classification, _ = await fresh.asked(sql)

    assert any("table public.items via view public.items_v" in line for line in classification.change_lines)
    assert "trigger items_noted on items" in _runs(classification)
    assert _state(fresh) == before


async def test_a_change_through_views_of_a_plain_table_is_counted_by_a_dry_run(fresh: PgDatabase) -> None:
    """No trigger, rule or untrusted code beneath: a rollback undoes the change, so the dry run counts its rows."""
    before = _state(fresh)

    _, impact = await fresh.asked("DELETE FROM items_vv WHERE id <= 2")

    assert impact.rows_affected == 2, impact.lines
    assert _state(fresh) == before


async def test_a_change_through_a_view_is_estimated_when_its_table_has_triggers(fresh: PgDatabase) -> None:
    fresh.run_as_owner(_BASE_TRIGGER, "ANALYZE items")

    _, impact = await fresh.asked("DELETE FROM items_v")

    assert any("by the planner's estimate" in line and "items: it has triggers" in line for line in impact.lines)


async def test_a_column_default_of_the_base_table_is_judged(fresh: PgDatabase) -> None:
    """An INSERT through the view writes the base table's default too: a user-defined function that moves a
    sequence, which a dry run must not run and the question must name."""
    before = _state(fresh)

    _, impact = await fresh.asked("INSERT INTO stamped_v (id, label) VALUES (10, 'j')")

    assert impact.rows_affected is None
    assert any("next_stamp" in line and "column default" in line for line in impact.lines), impact.lines
    assert _state(fresh) == before


async def test_a_view_over_a_partitioned_table_names_its_partitions_triggers(fresh: PgDatabase) -> None:
    classification, _ = await fresh.asked("DELETE FROM parted_v WHERE id = 1")

    assert "trigger parted_low_noted on parted_low" in _runs(classification)
    assert "table public.parted" in [str(target) for target in classification.touched]


@pytest.mark.parametrize(
    ("sql", "redefine"),
    [
        pytest.param(
            "DELETE FROM items_v",
            "CREATE OR REPLACE VIEW items_v AS SELECT id, label FROM other_items",
            id="view-redefined",
        ),
        pytest.param(
            "DELETE FROM items_vv",
            "CREATE OR REPLACE VIEW items_v AS SELECT id, label FROM other_items",
            id="inner-view-redefined",
        ),
        pytest.param(
            "DELETE FROM swapped",
            "DROP TABLE swapped; CREATE VIEW swapped AS SELECT id, label FROM other_items",
            id="table-replaced-by-a-view",
        ),
    ],
)
@pytest.mark.parametrize("counted", [False, True], ids=["uncounted", "counted"])
async def test_a_view_changed_while_asking_does_not_run(
    fresh: PgDatabase, sql: str, redefine: str, counted: bool
) -> None:
    """Whether the approval holds for the dry run's count or for none (as after an estimate), the statement must not
    change other_items, which nobody was asked about (nor count its rows, as many as the table asked about holds)."""
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner(*redefine.split("; "))  # while a person decides
    before = _state(fresh)

    # A table replaced by a view is another relation under its name: stopped by that first.
    with pytest.raises(ChangedSinceQuestion, match=r'other_items|swapped" now means'):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected if counted else None))

    assert impact.rows_affected is not None, impact.lines
    assert _state(fresh) == before


async def test_a_trigger_added_to_the_base_table_while_asking_does_not_run(fresh: PgDatabase) -> None:
    shown, _ = await fresh.asked("DELETE FROM items_v WHERE id = 3")
    fresh.run_as_owner("CREATE TRIGGER items_forget AFTER DELETE ON items EXECUTE FUNCTION forget_history()")
    before = _state(fresh)

    with pytest.raises(ChangedSinceQuestion, match="items_forget on items"):
        await fresh.run_approved(shown)

    assert _state(fresh) == before


async def test_an_instead_of_trigger_added_to_a_view_while_asking_does_not_run(fresh: PgDatabase) -> None:
    """The change then no longer lands in the table asked about, but in code nobody saw."""
    shown, _ = await fresh.asked("DELETE FROM items_v WHERE id = 3")
    fresh.run_as_owner(
        "CREATE TRIGGER items_v_instead INSTEAD OF DELETE ON items_v FOR EACH ROW EXECUTE FUNCTION forget_instead()"
    )
    before = _state(fresh)

    with pytest.raises(ChangedSinceQuestion, match=r"no longer delete table public\.items via view public\.items_v"):
        await fresh.run_approved(shown)

    assert _state(fresh) == before


@pytest.mark.parametrize("counted", [False, True], ids=["uncounted", "counted"])
@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("DELETE FROM items WHERE id IN (SELECT id FROM items_v)", id="a-view-it-reads"),
        pytest.param("DELETE FROM items_v WHERE id = 1", id="a-view-it-changes"),
    ],
)
async def test_a_view_redefined_to_call_a_function_while_asking_does_not_run(
    fresh: PgDatabase, sql: str, counted: bool
) -> None:
    """The view still leads to the table asked about, but its query now calls a function whose effect (a sequence
    moved) nobody was asked about."""
    shown, impact = await fresh.asked(sql)
    fresh.run_as_owner("CREATE OR REPLACE VIEW items_v AS SELECT id, label FROM items WHERE next_stamp() > 0")
    before = _state(fresh)

    with pytest.raises(ChangedSinceQuestion, match=r"public\.next_stamp"):
        await fresh.run_approved(shown, Bounds(rows=impact.rows_affected if counted else None))

    assert _state(fresh) == before


async def test_a_function_redefined_to_have_effects_while_asking_does_not_run(fresh: PgDatabase) -> None:
    """Judged harmless by its body when asked about; by the time the approved statement runs, it moves a sequence."""
    harmless = "CREATE OR REPLACE FUNCTION tidy(text) RETURNS text LANGUAGE sql STABLE AS $$ SELECT upper($1) $$"
    fresh.run_as_owner(harmless)
    shown, _ = await fresh.asked("UPDATE items SET label = tidy(label) WHERE id = 1")
    fresh.run_as_owner(harmless.replace("upper($1)", "$1 || nextval('stamps')"))
    before = _state(fresh)

    with pytest.raises(ChangedSinceQuestion, match="function tidy"):
        await fresh.run_approved(shown)

    assert all(change.target.name != "tidy" for change in shown.changes), shown.changes
    assert _state(fresh) == before


async def test_an_approved_change_through_an_unchanged_view_runs(fresh: PgDatabase) -> None:
    """Its base table's trigger was named, so it runs with the statement; the cascade too."""
    fresh.run_as_owner("CREATE TRIGGER items_forget AFTER DELETE ON items EXECUTE FUNCTION forget_history()")
    shown, _ = await fresh.asked("DELETE FROM items_vv WHERE id = 1")

    await fresh.run_approved(shown)

    assert fresh.rows("SELECT id FROM items ORDER BY id") == [(2,), (3,)]
    assert fresh.rows("SELECT id FROM parts ORDER BY id") == [(3,)]
    assert fresh.rows("SELECT count(*) FROM history") == [(0,)]


async def test_an_approved_counted_change_through_a_view_runs(fresh: PgDatabase) -> None:
    shown, impact = await fresh.asked("UPDATE items_checked SET label = 'u' WHERE id <= 2")

    await fresh.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert impact.rows_affected == 2, impact.lines
    assert fresh.rows("SELECT label FROM items ORDER BY id") == [("u",), ("u",), ("c",)]


async def test_a_write_a_check_option_refuses_is_reported_by_the_dry_run(fresh: PgDatabase) -> None:
    before = _state(fresh)

    _, impact = await fresh.asked("UPDATE items_checked SET id = 500 WHERE id = 1")

    assert impact.rows_affected == 0  # it failed: an approval holds it to changing nothing
    assert any("check option" in line for line in impact.lines), impact.lines
    assert _state(fresh) == before


@pytest.mark.parametrize(
    ("view", "code"),
    [
        pytest.param("items_instead", "trigger items_instead_delete on items_instead", id="instead-of-trigger"),
        pytest.param("items_ruled", "rule items_ruled_forget on items_ruled", id="instead-rule"),
    ],
)
async def test_a_view_whose_change_is_done_instead_names_that_code(fresh: PgDatabase, view: str, code: str) -> None:
    """PostgreSQL does not change the table beneath: the code named does the work, and the question says so."""
    fresh.run_as_owner(_BASE_TRIGGER)
    shown, impact = await fresh.asked(f"DELETE FROM {view} WHERE id = 1")

    await fresh.run_approved(shown)

    assert code in _runs(shown)
    assert "trigger items_noted on items" not in _runs(shown)
    assert "table public.items" not in [str(target) for target in shown.touched]
    assert any(f"view public.{view}: PostgreSQL runs its INSTEAD" in line for line in impact.lines), impact.lines
    assert fresh.rows("SELECT count(*) FROM items") == [(3,)]
    assert fresh.rows("SELECT count(*) FROM history") == [(0,)]


@pytest.mark.parametrize(
    "view",
    [
        pytest.param("items_joined", id="join"),
        pytest.param("items_conditional", id="conditional-instead-rule"),
    ],
)
async def test_a_view_postgresql_cannot_change_fails_cleanly(fresh: PgDatabase, view: str) -> None:
    """The question says PostgreSQL will refuse it; approved, it fails with PostgreSQL's error, changing nothing."""
    before = _state(fresh)
    shown, impact = await fresh.asked(f"DELETE FROM {view} WHERE id = 1")

    with pytest.raises(QueryFailed, match=f'cannot delete from view "{view}"'):
        await fresh.run_approved(shown)

    assert "table public.items" not in [str(target) for target in shown.touched]
    assert any(f"public.{view}" in line and "will refuse" in line for line in impact.lines), impact.lines
    assert _state(fresh) == before


async def test_merge_into_a_view(fresh: PgDatabase) -> None:
    """PostgreSQL 17 merges into an automatically updatable view's table; older servers refuse the statement."""
    sql = "MERGE INTO items_v t USING (VALUES (1)) AS s(id) ON t.id = s.id WHEN MATCHED THEN DELETE"
    fresh.run_as_owner(_BASE_TRIGGER)
    (version,) = fresh.rows("SELECT current_setting('server_version_num')::integer")[0]
    before = _state(fresh)

    shown, impact = await fresh.asked(sql)

    if version >= 170000:
        assert "trigger items_noted on items" in _runs(shown)
        return
    with pytest.raises(QueryFailed, match="cannot execute MERGE"):
        await fresh.run_approved(shown)
    assert any("public.items_v" in line and "will refuse" in line for line in impact.lines), impact.lines
    assert _state(fresh) == before


@dataclass
class _RedefinesTheView(Responder):
    """A person who takes a while to answer, during which the view's owner points it at other_items; they accept a
    question that does not name other_items, and would decline one that does."""

    pg: PgDatabase | None = None

    async def __call__(self, context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        if self.pg is not None and not self.asked:
            self.pg.run_as_owner("CREATE OR REPLACE VIEW items_v AS SELECT id, label FROM other_items")
        if "other_items" in params.message:
            self.asked.append(params)
            return ElicitResult(action="decline")
        return await super().__call__(context, params)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_view_redefined_while_asking_changes_nothing(
    fresh: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """The question names the base table, its trigger and its cascades; the view then points elsewhere: refused
    when the approved statement runs (legacy era), or asked again naming other_items (2026-07-28)."""
    fresh.run_as_owner(_BASE_TRIGGER)
    before = _state(fresh)
    responder = _RedefinesTheView(pg=fresh)
    query = "DELETE FROM items_v WHERE id = 1"
    result, decisions = await fresh.call_execute_query(query, tmp_path / "audit.db", responder, mode)

    first = responder.asked[0].message
    assert "delete table public.items via view public.items_v" in first, first
    assert "items_noted on items" in first, first
    assert "parts (CASCADE)" in first, first
    assert "executed" not in decisions, decisions
    assert result.is_error or "other_items" in responder.asked[-1].message, result
    assert _state(fresh) == before


async def test_through_the_server_a_view_postgresql_cannot_change_is_a_clean_error(
    fresh: PgDatabase, tmp_path: Path
) -> None:
    before = _state(fresh)
    result, decisions = await fresh.call_execute_query("DELETE FROM items_joined", tmp_path / "audit.db", Responder())

    message = "".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error
    assert 'cannot delete from view "items_joined"' in message, message
    assert "Traceback" not in message
    assert "failed" in decisions, decisions
    assert _state(fresh) == before
