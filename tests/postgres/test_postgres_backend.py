"""PostgresDatabase against a real server: the engine's own guards, the two roles, the catalog checks,
sessions that do not leak, dry runs that leave sequences alone, cancellation."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import anyio
import psycopg
import pytest

from safedb.db.backend import QueryLimits
from safedb.db.open import open_database
from safedb.db.postgres import PostgresDatabase
from safedb.db.sqlite import SqliteDatabase
from safedb.errors import ConfigurationError, DatabaseOpenError, QueryFailed, QueryTimeout
from safedb.sql.classification import ChangeKind, Classification
from tests.postgres.conftest import PgDatabase, without_fingerprints
from tests.postgres_server import READER, WRITER

pytestmark = pytest.mark.anyio


async def test_the_engine_refuses_writes_on_the_read_path_even_when_misclassified(pg: PgDatabase) -> None:
    """A forged "read-only" classification of a writing function: the READ ONLY transaction stops it."""
    database = pg.open()
    try:
        for sql in ("SELECT bump()", "SELECT nextval('tickets')"):
            with pytest.raises(QueryFailed, match=r"read-only transaction|permission denied"):
                await database.read(Classification(statement=sql))
    finally:
        await database.aclose()
    assert pg.rows("SELECT count(*) FROM notes WHERE id = 100") == [(0,)]
    assert pg.rows("SELECT last_value, is_called FROM tickets") == [(1, False)]


async def test_a_reader_role_that_could_change_the_database_is_warned_about(
    pg: PgDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="safedb.db.postgres.connections")
    for reader_url in (pg.reader_url(), pg.writer_url()):  # as docs/postgres.md says; the owner as the reader
        database = PostgresDatabase(reader_url, QueryLimits(), writer_dsn=pg.writer_url())
        try:
            assert (await database.read(await database.classify("SELECT 1"))).rows == ((1,),)
        finally:
            await database.aclose()
    (warning,) = caplog.records
    assert warning.getMessage().startswith(f"The read-only role {WRITER} may write ")
    assert "tables its search path reaches; may create objects in public. Reads still run" in warning.getMessage()


async def test_dates_and_times_python_cannot_hold_come_back_as_postgresqls_text(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        result = await database.read(
            await database.classify(
                "SELECT 'infinity'::date, '-infinity'::timestamptz, '10000-01-01'::timestamp, "
                "'0044-03-15 BC'::date, '24:00:00'::time, '2024-02-29'::date"
            )
        )
    finally:
        await database.aclose()

    assert result.rows == (
        ("infinity", "-infinity", "10000-01-01 00:00:00", "0044-03-15 BC", "24:00:00", "2024-02-29"),
    )


async def test_a_read_leaves_nothing_behind_even_when_a_function_it_calls_has_side_effects(pg: PgDatabase) -> None:
    """A STABLE label is not enforced: this function locks, changes a setting and notifies. The read's
    transaction rolls back (no setting, no notification) and its connection releases session locks."""
    pg.run_as_owner(
        "CREATE OR REPLACE FUNCTION quiet_read(integer) RETURNS integer LANGUAGE plpgsql STABLE AS $$ BEGIN "
        "PERFORM pg_advisory_lock($1); PERFORM set_config('search_path', 'pg_catalog', false); "
        "PERFORM pg_notify('reads', 'sent'); RETURN $1; END $$"
    )
    notifications: list[psycopg.Notify] = []
    with pg.server.connect(pg.name) as listener:
        listener.add_notify_handler(notifications.append)
        listener.execute("LISTEN reads")
        database = pg.open(QueryLimits())
        try:
            read = await database.read(Classification(statement="SELECT quiet_read(5151)"))
            after = await database.read(Classification(statement="SELECT current_setting('search_path')"))
            locks = pg.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 5151")
        finally:
            await database.aclose()
        await anyio.sleep(0.2)
        listener.execute("SELECT 1")  # takes in any notification that arrived
    assert read.rows == ((5151,),)
    assert locks == [(0,)]
    assert notifications == []
    assert after.rows != (("pg_catalog",),)


async def test_operators_and_aggregates_are_judged_by_the_functions_behind_them(pg: PgDatabase) -> None:
    """PostgreSQL records every aggregate as immutable, and an operator hides its function: both ask when
    what runs underneath is volatile."""
    pg.run_as_owner(
        "CREATE FUNCTION noisy_plus(bigint, bigint) RETURNS bigint LANGUAGE plpgsql VOLATILE AS "
        "$$ BEGIN PERFORM pg_notify('sums', ''); RETURN $1 + $2; END $$",
        "CREATE OPERATOR ## (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = noisy_plus)",
        "CREATE AGGREGATE noisy_sum(bigint) (SFUNC = noisy_plus, STYPE = bigint, INITCOND = '0')",
        "CREATE FUNCTION calm_plus(bigint, bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT $1 + $2 $$",
        "CREATE AGGREGATE calm_sum(bigint) (SFUNC = calm_plus, STYPE = bigint, INITCOND = '0')",
    )
    database = pg.open()
    try:
        operator = await database.classify("SELECT 2::bigint ## 3::bigint")
        aggregate = await database.classify("SELECT noisy_sum(id::bigint) FROM notes")
        calm = await database.classify("SELECT calm_sum(id::bigint) FROM notes WHERE id + 1 > 0")
    finally:
        await database.aclose()
    assert [(str(change.target), without_fingerprints(change.detail or "")) for change in operator.changes] == [
        ("function public.##", "an operator whose function is volatile")
    ]
    assert [change.kind for change in aggregate.changes] == [ChangeKind.FUNCTION_CALL]
    assert calm.read_only


async def test_read_path_refuses_a_forged_multi_statement_string(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        with pytest.raises(Exception, match="more than one statement"):
            await database.read(Classification(statement="SELECT 1; DELETE FROM notes"))
    finally:
        await database.aclose()
    assert pg.rows("SELECT count(*) FROM notes") == [(2,)]


async def test_reads_run_as_the_reader_and_writes_as_the_writer(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        read = await database.read(
            await database.classify("SELECT current_user, current_setting('transaction_read_only')")
        )
        written = await database.write(
            await database.classify("UPDATE notes SET body = current_user WHERE id = 2 RETURNING body")
        )
    finally:
        await database.aclose()
    assert read.rows == ((READER, "on"),)
    assert written.returned is not None
    assert written.returned.rows == ((WRITER,),)
    assert pg.rows("SELECT body FROM notes WHERE id = 2") == [(WRITER,)]
    pg.rows("UPDATE notes SET body = 'delete me not' WHERE id = 2")


def test_the_reader_role_is_read_only_outside_safedb_too(pg: PgDatabase) -> None:
    with psycopg.connect(pg.reader_url(), autocommit=True) as connection:
        assert connection.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            connection.execute("CREATE TABLE not_allowed (id int)")


@pytest.mark.parametrize(
    ("sql", "kinds"),
    [
        ("SELECT bump()", {ChangeKind.FUNCTION_CALL}),
        ("SELECT * FROM notes, LATERAL bump() AS b", {ChangeKind.FUNCTION_CALL}),
        ("SELECT double_it(balance) FROM accounts", set()),
        ("SELECT (balance).double_it FROM accounts", set()),
        ("SELECT (body).shout FROM notes", {ChangeKind.FUNCTION_CALL}),
        ("SELECT n.shout FROM notes n", {ChangeKind.FUNCTION_CALL}),
        ("SELECT * FROM loud_notes", {ChangeKind.FUNCTION_CALL}),
        ("SELECT * FROM calm_over_loud", {ChangeKind.FUNCTION_CALL}),
        ("SELECT * FROM calm_notes", set()),
        ("SELECT nextval('tickets')", {ChangeKind.SEQUENCE}),
        ("SELECT currval('tickets') FROM accounts WHERE false", set()),
        ("SELECT no_such_function(1)", {ChangeKind.UNKNOWN}),
        ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity", {ChangeKind.FUNCTION_CALL}),
        ("SELECT pg_advisory_lock(42)", {ChangeKind.LOCK}),
        ("SELECT random(), now(), clock_timestamp(), pg_total_relation_size('accounts')", set()),
        ("SELECT * FROM pg_stat_activity", set()),
        ("SELECT a.owner, a.balance FROM accounts a", set()),
    ],
)
async def test_function_volatility_is_resolved_in_the_catalog(pg: PgDatabase, sql: str, kinds: set[ChangeKind]) -> None:
    (classification,) = await pg.classifications(sql)
    assert set(classification.kinds) == kinds, classification.changes


async def test_approved_statements_outside_a_transaction_block_run(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        outcome = await database.write(await database.classify("VACUUM (ANALYZE) accounts"))
    finally:
        await database.aclose()
    assert outcome.rows_affected is None
    assert pg.rows(
        "SELECT vacuum_count > 0 OR autovacuum_count > 0 FROM pg_stat_user_tables WHERE relname = 'accounts'"
    )


async def test_a_failure_outside_a_transaction_block_says_that_part_of_the_work_may_remain(pg: PgDatabase) -> None:
    pg.run_as_owner("CREATE TABLE twins (v integer)", "INSERT INTO twins VALUES (1), (1)")
    database = pg.open()
    try:
        classification = await database.classify("CREATE UNIQUE INDEX CONCURRENTLY twins_v ON twins (v)")
        with pytest.raises(QueryFailed, match="outside a transaction block, so there was no rollback"):
            await database.write(classification)
    finally:
        await database.aclose()
    # What PostgreSQL leaves behind, as the message says.
    assert pg.rows("SELECT indisvalid FROM pg_index WHERE indexrelid = 'twins_v'::regclass") == [(False,)]


async def test_an_approved_statement_runs_exactly_as_written_after_non_ascii_text(pg: PgDatabase) -> None:
    """Sliced as bytes, this statement ran as `... OR id > 1` and deleted row 2."""
    database = pg.open()
    try:
        outcome = await database.write(await database.classify("DELETE FROM notes WHERE body = 'Zoëë' OR id > 100;"))
    finally:
        await database.aclose()
    assert outcome.rows_affected == 0
    assert pg.rows("SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_session_state_of_an_approved_statement_does_not_outlive_the_call(pg: PgDatabase) -> None:
    database = pg.open(QueryLimits())
    try:
        await database.write(await database.classify("SELECT pg_advisory_lock(4242)"))
        await database.write(await database.classify("SELECT set_config('work_mem', '7MB', false)"))
        locks = pg.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242")
        follow_up = await database.write(await database.classify("SELECT current_setting('work_mem')"))
    finally:
        await database.aclose()
    assert locks == [(0,)]
    assert follow_up.returned is not None
    assert follow_up.returned.rows != (("7MB",),)


async def test_a_count_postgresql_does_not_report_is_not_shown_or_held_to(pg: PgDatabase) -> None:
    """PostgreSQL counts the rows a statement returns, not those its data-modifying WITH queries change, and
    for EXPLAIN ANALYZE the lines of the plan (one, in JSON, however many rows the DELETE takes)."""
    pg.rows("INSERT INTO notes VALUES (70, 'cte one'), (71, 'cte two')")
    try:
        in_select, in_delete, explained, plain = await pg.previews(
            "WITH d AS (DELETE FROM notes WHERE body LIKE 'cte%' RETURNING 1) SELECT count(*) FROM d",
            "WITH d AS (DELETE FROM notes WHERE id = 70 RETURNING id) "
            "DELETE FROM notes WHERE id IN (SELECT id + 1 FROM d)",
            "EXPLAIN (ANALYZE, FORMAT JSON) DELETE FROM notes WHERE body LIKE 'cte%'",
            "DELETE FROM notes WHERE body LIKE 'cte%'",
        )
        assert pg.rows("SELECT count(*) FROM notes WHERE body LIKE 'cte%'") == [(2,)]
    finally:
        pg.rows("DELETE FROM notes WHERE id IN (70, 71)")
    assert in_select.rows_affected is None
    assert in_delete.rows_affected is None
    assert "does not report how many rows" in in_select.lines[0]
    assert explained.rows_affected is None
    assert "EXPLAIN ANALYZE reports its plan, not how many rows" in explained.lines[0]
    assert plain.rows_affected == 2


async def test_preview_never_advances_a_sequence(pg: PgDatabase) -> None:
    before = pg.rows("SELECT last_value, is_called FROM accounts_id_seq")
    insert, delete = await pg.previews(
        "INSERT INTO accounts (owner) VALUES ('new')", "DELETE FROM accounts WHERE balance > 150"
    )
    assert pg.rows("SELECT last_value, is_called FROM accounts_id_seq") == before
    assert insert.rows_affected is None
    assert "planner's estimate" in insert.lines[0]
    assert "sequence" in insert.lines[0]
    assert delete.rows_affected == 2
    assert pg.rows("SELECT count(*) FROM accounts") == [(3,)]


async def test_preview_never_advances_a_sequence_through_a_function_or_a_cascade(pg: PgDatabase) -> None:
    """Sequences reached through a function in a default, a function labelled STABLE, or a foreign key
    that sets rows to their default: no preview makes a dry run. Where a user-defined function is involved,
    not even the planner is asked (it may fold or inline the function); `nextval` itself it never runs."""
    pg.run_as_owner(
        "CREATE SEQUENCE hidden_ids",
        "CREATE FUNCTION next_hidden() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT nextval('hidden_ids') $$",
        "CREATE FUNCTION hidden_stable() RETURNS bigint LANGUAGE plpgsql STABLE AS "
        "$$ BEGIN RETURN nextval('hidden_ids'); END $$",
        "CREATE TABLE numbered (id bigint DEFAULT next_hidden(), label text)",
        "CREATE TABLE parents (id integer PRIMARY KEY)",
        "INSERT INTO parents VALUES (0), (1)",
        "CREATE TABLE children (id integer, parent integer DEFAULT nextval('hidden_ids') % 1 "
        "REFERENCES parents ON DELETE SET DEFAULT)",
        "INSERT INTO children VALUES (1, 1)",
    )
    before = pg.rows("SELECT last_value, is_called FROM hidden_ids")
    previews = await pg.previews(
        "INSERT INTO numbered (label) VALUES ('x')",
        "UPDATE notes SET body = body WHERE hidden_stable() > 0",
        "DELETE FROM parents WHERE id = 1",
    )
    assert pg.rows("SELECT last_value, is_called FROM hidden_ids") == before
    assert [preview.rows_affected for preview in previews] == [None, None, None]
    assert ["no dry run and no planner's estimate" in preview.lines[0] for preview in previews] == [True, True, False]
    assert "by the planner's estimate; no dry run" in previews[2].lines[0]
    assert pg.rows("SELECT parent FROM children") == [(1,)]


async def test_preview_names_the_tables_foreign_keys_carry_a_change_to(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE TABLE clients (id integer PRIMARY KEY)",
        "CREATE TABLE bills (id integer PRIMARY KEY, client integer REFERENCES clients ON DELETE CASCADE)",
        "CREATE TABLE bill_lines (bill integer REFERENCES bills ON DELETE CASCADE ON UPDATE CASCADE)",
        "CREATE TABLE contacts (client integer REFERENCES clients ON DELETE SET NULL)",
        "CREATE TABLE visits (client integer REFERENCES clients)",
        "INSERT INTO clients VALUES (1)",
    )
    delete, update, truncate = await pg.previews(
        "DELETE FROM clients WHERE id = 1", "UPDATE bills SET id = 2", "TRUNCATE clients CASCADE"
    )
    assert (
        delete.lines[-1]
        == "Foreign keys carry the delete on to: bill_lines (CASCADE), bills (CASCADE), contacts (SET NULL)."
    )
    assert update.lines[-1] == "If it changes a referenced key, foreign keys carry it on to: bill_lines (CASCADE)."
    assert truncate.lines[-1] == (
        "With CASCADE it also empties the tables that reference it: bill_lines, bills, contacts, visits."
    )
    assert pg.rows("SELECT count(*) FROM clients") == [(1,)]


async def test_preview_of_a_drop_lists_what_cascades_as_postgresql_reports_it(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE TABLE stock (id integer PRIMARY KEY, qty integer)",
        "CREATE VIEW low_stock AS SELECT * FROM stock WHERE qty < 5",
        "CREATE VIEW empty_stock AS SELECT * FROM low_stock WHERE qty = 0",
        "CREATE TABLE kept (id integer)",
        "CREATE VIEW kept_view AS SELECT * FROM kept",
    )
    cascade, plain, alone = await pg.previews("DROP TABLE stock CASCADE", "DROP TABLE kept", "DROP VIEW empty_stock")
    assert cascade.lines[-1] == "It also drops: view low_stock; view empty_stock."
    assert plain.lines[-1].startswith("PostgreSQL will refuse this DROP: cannot drop table kept because other")
    assert "view kept_view depends on table kept" in plain.lines[-1]
    assert not any(line.startswith(("It also drops", "PostgreSQL will refuse")) for line in alone.lines)
    assert pg.rows("SELECT count(*) FROM pg_views WHERE viewname IN ('low_stock', 'empty_stock', 'kept_view')") == [
        (3,)
    ]


async def test_preview_of_an_alter_table_that_drops_a_column_lists_what_cascades(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE TABLE parcels (id integer PRIMARY KEY, weight integer, note text)",
        "CREATE VIEW heavy_parcels AS SELECT id, weight FROM parcels WHERE weight > 10",
    )
    cascade, plain, mixed = await pg.previews(
        "ALTER TABLE parcels DROP COLUMN weight CASCADE",
        "ALTER TABLE parcels DROP COLUMN weight",
        "ALTER TABLE parcels DROP COLUMN note, ALTER COLUMN weight TYPE bigint",
    )
    assert cascade.lines[-1] == "It also drops: view heavy_parcels."
    assert plain.lines[-1].startswith("PostgreSQL will refuse this DROP: cannot drop column weight")
    # Not dry-run: the rest of the statement could rewrite the whole table.
    assert not any(line.startswith(("It also drops", "PostgreSQL will refuse")) for line in mixed.lines)
    assert pg.rows("SELECT count(*) FROM pg_views WHERE viewname = 'heavy_parcels'") == [(1,)]


async def test_preview_is_bounded_by_its_time_limit(pg: PgDatabase) -> None:
    database = pg.open(QueryLimits(preview_timeout=0.3))
    try:
        with anyio.fail_after(15):
            impact = await database.preview(
                await database.classify("DELETE FROM notes WHERE id IN (SELECT 1 FROM pg_sleep(5))")
            )
    finally:
        await database.aclose()
    assert "did not finish" in impact.lines[0] or "time limit" in impact.lines[0], impact.lines
    assert pg.rows("SELECT count(*) FROM notes") == [(2,)]


_SLEEPING = (
    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(20)%' AND state = 'active' "
    "AND pid <> pg_backend_pid()"
)


async def test_cancelling_a_read_frees_the_server(pg: PgDatabase) -> None:
    database = pg.open(QueryLimits(statement_timeout=30))
    try:
        classification = await database.classify("SELECT pg_sleep(20)")
        assert classification.read_only
        with anyio.move_on_after(0.5):
            await database.read(classification)
        with anyio.fail_after(10):
            while pg.rows(_SLEEPING) != [(0,)]:
                await anyio.sleep(0.05)
        result = await database.read(await database.classify("SELECT 1 AS one"))
    finally:
        await database.aclose()
    assert result.rows == ((1,),)


async def test_statement_timeout_applies_to_approved_writes(pg: PgDatabase) -> None:
    database = pg.open(QueryLimits(statement_timeout=0.3))
    try:
        with anyio.fail_after(15), pytest.raises(QueryTimeout):
            await database.write(await database.classify("UPDATE notes SET body = 'late' FROM pg_sleep(3) AS s"))
    finally:
        await database.aclose()
    assert pg.rows("SELECT count(*) FROM notes WHERE body = 'late'") == [(0,)]


async def test_open_database_picks_the_backend(pg: PgDatabase, tmp_path: Path) -> None:
    postgres = open_database(pg.reader_url(), QueryLimits(), writer_url=pg.writer_url())
    assert isinstance(postgres, PostgresDatabase)
    assert "safedb_writer@127.0.0.1" in postgres.label
    assert pg.server.passwords[WRITER] not in postgres.label
    await postgres.aclose()
    path = tmp_path / "x.db"
    sqlite3.connect(path).close()
    sqlite = open_database(str(path), QueryLimits())
    assert isinstance(sqlite, SqliteDatabase)
    await sqlite.aclose()
    with pytest.raises(ConfigurationError):
        open_database(str(path), QueryLimits(), writer_url=pg.writer_url())
    wrong = pg.reader_url().replace(pg.server.passwords[READER], "wrong-password")
    with pytest.raises(DatabaseOpenError) as caught:
        open_database(wrong, QueryLimits())
    assert "wrong-password" not in str(caught.value)
