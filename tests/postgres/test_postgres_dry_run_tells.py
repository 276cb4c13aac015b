"""Red team: a change that tells its dry run from its approved run, and makes up the count elsewhere.

A statement (or a view or CHECK made earlier) can tell SafeDB's dry run from its approved run: the dry run has a
shorter statement timeout, holds fewer locks, takes less time. An approval held the statement only to its own row
count, so with the same count the approved run could delete another child table's rows through their parent,
delete other customers and the orders a foreign key cascades to, or delete where the dry run updated. An approval
now holds for the rows the dry run changed in each table, by kind, as the question shows them.
"""

from __future__ import annotations

import pytest

from safedb.db.backend import Bounds
from safedb.errors import ChangedSinceQuestion, QueryFailed, RowCountChanged
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

IN_DRY_RUN = "current_setting('statement_timeout') = '5s'"

_FRESH = (
    "DROP TABLE IF EXISTS log_base, customer, orders, inv, plain, payout, tmp_import CASCADE",
    "DROP VIEW IF EXISTS purge_policy, cleanup_candidates, merge_mode",
    "CREATE TABLE log_base (id integer, msg text)",
    "CREATE TABLE scratch_log () INHERITS (log_base)",
    "CREATE TABLE audit_log () INHERITS (log_base)",
    "INSERT INTO scratch_log VALUES (1, 's'), (2, 's'), (3, 's')",
    "INSERT INTO audit_log VALUES (1, 'a'), (2, 'a'), (3, 'a')",
    "CREATE VIEW purge_policy AS SELECT CASE WHEN "
    f"{IN_DRY_RUN} THEN 'scratch_log'::regclass ELSE 'audit_log'::regclass END AS target_table",
    "CREATE TABLE customer (id integer PRIMARY KEY, name text)",
    "INSERT INTO customer VALUES (1, 'test-a'), (2, 'test-b'), (3, 'alice'), (4, 'bob')",
    "CREATE TABLE orders (id serial PRIMARY KEY, customer_id integer REFERENCES customer ON DELETE CASCADE)",
    "INSERT INTO orders (customer_id) SELECT 3 + g % 2 FROM generate_series(1, 50) AS g",
    "CREATE VIEW cleanup_candidates AS SELECT id FROM customer "
    f"WHERE CASE WHEN {IN_DRY_RUN} THEN name LIKE 'test-%' ELSE name NOT LIKE 'test-%' END",
    "CREATE TABLE inv (id integer PRIMARY KEY, qty integer)",
    "INSERT INTO inv SELECT g, g FROM generate_series(1, 5) AS g",
    f"CREATE VIEW merge_mode AS SELECT {IN_DRY_RUN} AS keep",
    f"CREATE TABLE payout (id integer, amount integer, CONSTRAINT sane CHECK (NOT {IN_DRY_RUN}))",
    "CREATE TABLE tmp_import (id integer)",
    "CREATE VIEW import_v AS SELECT id FROM tmp_import",
    "CREATE TABLE plain (id integer PRIMARY KEY, v text)",
    "INSERT INTO plain SELECT g, 'x' FROM generate_series(1, 5) AS g",
)


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_FRESH)
    return empty_pg


@pytest.mark.parametrize(
    ("sql", "unchanged"),
    [
        (
            "DELETE FROM log_base WHERE tableoid = (SELECT target_table FROM purge_policy)",
            "SELECT count(*) FROM audit_log",
        ),
        ("DELETE FROM customer WHERE id IN (SELECT id FROM cleanup_candidates)", "SELECT count(*) FROM orders"),
        (
            "MERGE INTO inv AS t USING (SELECT id FROM inv WHERE id <= 2) AS s ON t.id = s.id "
            "WHEN MATCHED AND (SELECT keep FROM merge_mode) THEN UPDATE SET qty = t.qty WHEN MATCHED THEN DELETE",
            "SELECT count(*) FROM inv",
        ),
    ],
    ids=["another-child-table", "a-hidden-cascade", "delete-where-the-dry-run-updated"],
)
async def test_an_approved_change_making_up_its_count_elsewhere_is_rolled_back(
    fresh: PgDatabase, sql: str, unchanged: str
) -> None:
    before = fresh.rows(unchanged)
    classification, impact = await fresh.asked(sql)
    assert impact.rows_affected is not None
    assert impact.row_changes is not None
    assert any("the dry run changed, by table" in line for line in impact.lines)
    with pytest.raises(ChangedSinceQuestion, match="it changed other rows than its dry run"):
        await fresh.run_approved(classification, Bounds(rows=impact.rows_affected, row_changes=impact.row_changes))
    assert fresh.rows(unchanged) == before


async def test_the_question_shows_each_table_the_dry_run_changed(fresh: PgDatabase) -> None:
    _, impact = await fresh.asked("DELETE FROM customer WHERE id = 3")
    assert impact.row_changes == ("public.customer: 1 row deleted", "public.orders: 25 rows deleted")


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM plain WHERE id <= 2",
        "UPDATE plain SET v = 'y' WHERE id = 3 RETURNING id",  # its dry run runs in a savepoint
        "INSERT INTO plain VALUES (9, 'z') ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        "DELETE FROM customer WHERE id = 4",  # with the orders it cascades to
    ],
)
async def test_an_approved_change_doing_what_its_dry_run_did_runs(fresh: PgDatabase, sql: str) -> None:
    classification, impact = await fresh.asked(sql)
    assert impact.row_changes
    await fresh.run_approved(classification, Bounds(rows=impact.rows_affected, row_changes=impact.row_changes))


async def test_an_approved_run_on_the_session_of_its_dry_run_counts_only_its_own_rows(fresh: PgDatabase) -> None:
    """PostgreSQL's counts for a transaction also hold what the session's earlier ones did, until it reports them:
    the approved run, on the pooled session its dry run had just used, counted 2 rows updated for 1."""
    database = fresh.open()
    try:
        classification = await database.classify("UPDATE plain SET v = 'w' WHERE id = 1")
        impact = await database.preview(classification)
        assert impact.row_changes == ("public.plain: 1 row updated",)
        await database.write(classification, Bounds(rows=impact.rows_affected, row_changes=impact.row_changes))
    finally:
        await database.aclose()
    assert fresh.rows("SELECT v FROM plain WHERE id = 1") == [("w",)]


@pytest.mark.parametrize(
    "sql",
    [
        f"UPDATE plain SET v = 'gone' WHERE id <= 5 / (SELECT CASE WHEN {IN_DRY_RUN} THEN 0 ELSE 1 END)",
        "INSERT INTO payout SELECT g, 1000000 FROM generate_series(1, 50) AS g",  # its CHECK fails in the dry run only
        "UPDATE plain SET v = 'gone' RETURNING 1 / (xmin::text = pg_current_xact_id_if_assigned()::text)::int",
    ],
    ids=["division-by-zero", "check-constraint", "returning-in-a-savepoint"],
)
async def test_a_change_failing_only_in_its_dry_run_may_change_nothing_approved(fresh: PgDatabase, sql: str) -> None:
    """Its question said the dry run did not finish, and held it to no count: approved, it changed every row."""
    before = fresh.rows("SELECT count(*) FROM plain WHERE v = 'gone'") + fresh.rows("SELECT count(*) FROM payout")
    classification, impact = await fresh.asked(sql)
    assert impact.rows_affected == 0
    assert "failed (PostgreSQL reported:" in impact.lines[0]
    with pytest.raises(RowCountChanged):
        await fresh.run_approved(classification, Bounds(rows=impact.rows_affected, row_changes=impact.row_changes))
    after = fresh.rows("SELECT count(*) FROM plain WHERE v = 'gone'") + fresh.rows("SELECT count(*) FROM payout")
    assert after == before


async def test_a_change_failing_in_both_runs_fails_as_before(fresh: PgDatabase) -> None:
    sql = "UPDATE plain SET v = 'x' WHERE id = 1 / (SELECT count(*) - 5 FROM plain)"  # 1 / 0, not planned away
    classification, impact = await fresh.asked(sql)
    assert impact.rows_affected == 0
    with pytest.raises(QueryFailed, match="division by zero"):
        await fresh.run_approved(classification, Bounds(rows=impact.rows_affected, row_changes=impact.row_changes))


async def test_a_drop_whose_dry_run_cannot_take_its_lock_may_take_nothing_with_it(fresh: PgDatabase) -> None:
    """A read that needs no approval, holding the table past the dry run's lock wait, kept the question from listing
    the view a `DROP ... CASCADE` takes with it, and left the approval unbound: approved, it dropped the view too."""
    with fresh.server.connect(fresh.name) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tmp_import")  # holds ACCESS SHARE until the transaction ends
        classification, impact = await fresh.asked("DROP TABLE tmp_import CASCADE")
        reader.execute("COMMIT")
    assert impact.drops == ()
    assert "an approval holds it to dropping nothing more than it names" in impact.lines[-1]
    with pytest.raises(ChangedSinceQuestion, match="import_v"):
        await fresh.run_approved(classification, Bounds(rows=impact.rows_affected, drops=impact.drops))
    assert fresh.rows("SELECT count(*) FROM pg_views WHERE viewname = 'import_v'") == [(1,)]
