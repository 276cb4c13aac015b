"""The audit log in a PostgreSQL schema: triggers and privileges, apart from the data, opening and refusing.

The behaviours both stores share (recording every decision, filters, verify naming each kind of tampering)
run against this store too, in test_audit_events.py, test_audit_store.py and test_audit_verify.py.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql

from safedb.audit import (
    AuditDecision,
    AuditQuery,
    AuditWriteFailed,
    PostgresAuditStore,
    SqliteAuditStore,
    Tampering,
    open_audit_store,
    verify,
)
from safedb.audit.open import DEFAULT_SCHEMA, split_audit_url
from safedb.audit.postgres_schema import lock_key
from safedb.audit.records import format_time
from safedb.errors import DatabaseOpenError
from tests.audit.helpers import accepted_unasked, event, fill
from tests.audit.stores import PG_TRIGGERS, PostgresLog, new_schema
from tests.postgres_server import READER, SUPERUSER, WRITER, PostgresServer, free_port


def _count(log: PostgresLog) -> int:
    with log.connect() as connection:
        (count,) = connection.execute("SELECT count(*) FROM audit_log").fetchone()
        return int(count)


@pytest.mark.parametrize("table", ["audit_log", "audit_head"])
def test_truncate_is_refused(postgres_log: PostgresLog, table: str) -> None:
    fill(postgres_log, 3)
    with postgres_log.connect() as connection, pytest.raises(psycopg.Error, match=r"append-only|cannot be deleted"):
        connection.execute(f"TRUNCATE {table}")
    assert _count(postgres_log) == 3
    with postgres_log.open(readonly=True) as store:
        assert verify(store).intact


def test_writer_cannot_insert_after_a_gap_or_move_the_head_to_another_row(postgres_log: PostgresLog) -> None:
    records = fill(postgres_log, 2)
    with postgres_log.connect() as connection:
        with pytest.raises(psycopg.Error, match="must follow the last one"):
            connection.execute(
                "INSERT INTO audit_log SELECT 3, time, decision, request_id, target, caller, sql, classification, "
                "changes, justification, environment, rows_affected, error, 'f', hash FROM audit_log WHERE seq = 2"
            )
        connection.rollback()
        with pytest.raises(psycopg.Error, match=r"CHECK|check constraint"):
            connection.execute("INSERT INTO audit_head (id, seq, hash) VALUES (2, 9, 'x')")
        connection.rollback()
    with postgres_log.open(readonly=True) as store:
        report = verify(store)
    assert report.intact
    assert report.head is not None
    assert (report.head.seq, report.head.hash) == (2, records[-1].hash)


def test_a_separate_appending_role_cannot_touch_the_triggers(
    postgres_cluster: PostgresServer, audit_database: str
) -> None:
    """The recommended deployment: another role owns the schema; SafeDB's gets SELECT, INSERT (+ UPDATE on the head)."""
    owner = PostgresLog(postgres_cluster, audit_database, new_schema(), role=SUPERUSER)
    fill(owner, 1)
    schema = sql.Identifier(owner.schema)
    writer = sql.Identifier(WRITER)
    with postgres_cluster.connect(audit_database) as admin:
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, writer))
        log, head = sql.Identifier(owner.schema, "audit_log"), sql.Identifier(owner.schema, "audit_head")
        admin.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(log, writer))
        admin.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(head, writer))
    appender = PostgresLog(postgres_cluster, audit_database, owner.schema, role=WRITER)
    with appender.open() as store:
        records = [store.append(event(AuditDecision.REQUESTED, index)) for index in range(1, 4)]
    assert [record.seq for record in records] == [2, 3, 4]
    for statement in (
        "ALTER TABLE audit_log DISABLE TRIGGER USER",
        "DROP TRIGGER audit_log_no_delete ON audit_log",
        "DROP TABLE audit_head",
        "DELETE FROM audit_log WHERE seq = 4",
        "UPDATE audit_log SET sql = 'SELECT 1'",
    ):
        with appender.connect() as connection, pytest.raises(psycopg.Error, match=r"owner|permission denied"):
            connection.execute(statement)
    reader = PostgresLog(postgres_cluster, audit_database, owner.schema, role=READER)
    with pytest.raises(DatabaseOpenError, match="permission denied"):
        reader.open(readonly=True).close()
    with appender.open(readonly=True) as store:
        report = verify(store)
    assert report.intact, report.summary()
    assert report.checked == 4


def test_a_rolled_back_data_change_keeps_its_record(postgres_cluster: PostgresServer, audit_database: str) -> None:
    """The store writes on its own connection: the record commits while the data transaction is still open."""
    table = f"invoices_{uuid.uuid4().hex[:8]}"
    with postgres_cluster.connect(audit_database, WRITER) as setup:
        setup.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(sql.Identifier(table)))
        setup.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(sql.Identifier(table)))
    log = PostgresLog(postgres_cluster, audit_database, new_schema())

    async def scenario() -> None:
        with psycopg.connect(log.url, connect_timeout=10) as data, log.open() as store:
            data.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
            accepted = await store.record(accepted_unasked(1))
            failed = await store.record(event(AuditDecision.FAILED, 1))
            assert (accepted.seq, failed.seq) == (1, 2)
            data.rollback()

    anyio.run(scenario)
    with postgres_cluster.connect(audit_database, WRITER) as check:
        assert check.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone() == (1,)
    with log.open(readonly=True) as store:
        decisions = [record.decision for record in store.records(AuditQuery(request_id="req-1"))]
        assert verify(store).intact
    assert decisions == [AuditDecision.ACCEPTED, AuditDecision.FAILED]


def test_text_postgresql_cannot_hold_is_kept_escaped(postgres_log: PostgresLog) -> None:
    tricky = event(AuditDecision.REQUESTED).followed_by(
        AuditDecision.REQUESTED, sql="SELECT '\ud800', 'naïve ✓', 'nul\x00byte'", changes=("nul\x00",)
    )
    with postgres_log.open() as store:
        written = store.append(tricky)
        (read,) = store.records(AuditQuery())
        assert verify(store).intact
    assert read == written
    assert read.sql == "SELECT '\\ud800', 'naïve ✓', 'nul\\x00byte'"
    assert read.changes == ("nul\\x00",)


def _database_now(log: PostgresLog) -> str:
    with log.connect() as connection:
        (now,) = connection.execute("SELECT clock_timestamp()").fetchone()
    return format_time(now)


def test_record_times_come_from_the_database_clock(postgres_log: PostgresLog) -> None:
    with postgres_log.open() as store:
        before = _database_now(postgres_log)
        record = store.append(event(AuditDecision.REQUESTED))
        after = _database_now(postgres_log)
    assert before <= record.time <= after


def test_an_append_waits_for_the_lock_only_so_long(postgres_log: PostgresLog) -> None:
    fill(postgres_log, 1)
    with (
        PostgresAuditStore.open(postgres_log.url, schema=postgres_log.schema, busy_timeout=0.3) as store,
        psycopg.connect(postgres_log.url, autocommit=True, connect_timeout=10) as holder,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(postgres_log.schema),))
        with pytest.raises(AuditWriteFailed, match=r"lock timeout|canceling statement"):
            store.append(event(AuditDecision.REQUESTED, 2))
        holder.execute("SELECT pg_advisory_unlock(%s)", (lock_key(postgres_log.schema),))
        assert store.append(event(AuditDecision.REQUESTED, 3)).seq == 2
    with postgres_log.open(readonly=True) as store:
        assert verify(store).intact


def test_a_connection_lost_while_idle_is_reopened_before_the_next_append(postgres_log: PostgresLog) -> None:
    with postgres_log.open() as store:
        store.append(event(AuditDecision.REQUESTED, 1))
        with postgres_log.tampering() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE application_name = 'safedb-audit' AND datname = current_database() AND pid <> pg_backend_pid()"
            )  # waits until the session has ended: its goodbye is sent, as after a restart some time ago
        # Not one failed append (the decision it records would be lost): the ended session is noticed first.
        assert store.append(event(AuditDecision.REQUESTED, 2)).seq == 2
    # `tampering` disabled the triggers; opening for writing puts them back.
    with postgres_log.open() as store:
        report = verify(store)
    assert report.intact, report.summary()
    assert _enabled_triggers(postgres_log) == set(PG_TRIGGERS)


def _enabled_triggers(log: PostgresLog) -> set[str]:
    with log.connect() as connection:
        rows = connection.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND NOT tgisinternal "
            "AND tgenabled <> 'D'",
            (log.schema,),
        ).fetchall()
    return {row[0] for row in rows}


def test_disabled_triggers_are_restored_on_open_with_a_warning(
    postgres_log: PostgresLog, caplog: pytest.LogCaptureFixture
) -> None:
    fill(postgres_log, 2)
    with postgres_log.tampering() as admin:
        admin.execute("DROP TRIGGER audit_log_no_update ON audit_log")
    assert "audit_log_no_update" not in _enabled_triggers(postgres_log)
    with caplog.at_level(logging.WARNING, logger="safedb.audit.postgres_schema"):
        postgres_log.open().close()
    assert "lacks working triggers" in caplog.text
    assert _enabled_triggers(postgres_log) == set(PG_TRIGGERS)
    with postgres_log.connect() as connection, pytest.raises(psycopg.Error, match="append-only"):
        connection.execute("UPDATE audit_log SET sql = 'x'")


def test_missing_schema_is_not_created_when_reading(postgres_log: PostgresLog) -> None:
    with pytest.raises(DatabaseOpenError, match=f"Audit log not found: .* has no table {postgres_log.schema}"):
        postgres_log.open(readonly=True)
    with postgres_log.connect() as connection:
        found = connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (postgres_log.schema,)).fetchone()
    assert found is None


@pytest.mark.parametrize("readonly", [True, False])
def test_a_schema_with_other_tables_is_refused_and_left_alone(
    postgres_cluster: PostgresServer, audit_database: str, readonly: bool
) -> None:
    schema = new_schema()
    with postgres_cluster.connect(audit_database, WRITER) as writer:
        writer.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        writer.execute(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(schema, "users")))
    log = PostgresLog(postgres_cluster, audit_database, schema)
    with pytest.raises(DatabaseOpenError, match=f"Schema {schema} in .* is not a SafeDB audit log"):
        log.open(readonly=readonly)
    with log.connect() as connection:
        tables = connection.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = ?", (schema,)
        ).fetchall()
    assert [row[0] for row in tables] == ["users"]


def test_an_audit_log_table_of_another_shape_or_a_newer_format_is_refused(postgres_log: PostgresLog) -> None:
    fill(postgres_log, 1)
    with postgres_log.tampering() as admin:
        admin.execute("COMMENT ON TABLE audit_log IS 'SafeDB audit log, format 99'")
    with pytest.raises(DatabaseOpenError, match="newer SafeDB"):
        postgres_log.open(readonly=True)
    with postgres_log.tampering() as admin:
        admin.execute("COMMENT ON TABLE audit_log IS 'invoices'")
    for readonly in (True, False):
        with pytest.raises(DatabaseOpenError, match="is not a SafeDB audit log"):
            postgres_log.open(readonly=readonly)


def test_a_lost_head_table_stops_appends_and_shows_in_verify(postgres_log: PostgresLog) -> None:
    fill(postgres_log, 2)
    with postgres_log.tampering() as admin:
        admin.execute("DROP TABLE audit_head")
    with pytest.raises(DatabaseOpenError, match="lost its head anchor table"):
        postgres_log.open()
    with postgres_log.open(readonly=True) as store:
        report = verify(store)
    assert report.finding is not None
    assert report.finding.kind is Tampering.HEAD_MISSING


def test_unreachable_server_is_a_clear_error_without_the_password(postgres_cluster: PostgresServer) -> None:
    password = postgres_cluster.passwords[WRITER]
    url = postgres_cluster.url(WRITER).replace(f":{postgres_cluster.port}/", f":{free_port()}/")
    with pytest.raises(DatabaseOpenError) as raised:
        PostgresAuditStore.open(url)
    message = str(raised.value)
    assert message.startswith(f"Cannot connect to the PostgreSQL audit log at {WRITER}@127.0.0.1:")
    assert password not in message
    wrong = postgres_cluster.url(WRITER).replace(password, "not-the-password")
    with pytest.raises(DatabaseOpenError, match="password authentication failed") as raised:
        PostgresAuditStore.open(wrong)
    assert "not-the-password" not in str(raised.value)


def test_readonly_store_cannot_append_and_a_bad_schema_name_is_refused(postgres_log: PostgresLog) -> None:
    fill(postgres_log, 1)
    with postgres_log.open(readonly=True) as store, pytest.raises(AuditWriteFailed, match="not open for writing"):
        store.append(event(AuditDecision.REQUESTED))
    with pytest.raises(DatabaseOpenError, match="not a usable schema name"):
        PostgresAuditStore.open(postgres_log.url, schema='x"; DROP TABLE audit_log; --')
    assert _count(postgres_log) == 1


def test_open_audit_store_chooses_the_store_by_location(postgres_log: PostgresLog, tmp_path: Path) -> None:
    with open_audit_store(postgres_log.location) as store:
        assert isinstance(store, PostgresAuditStore)
        assert store.schema == postgres_log.schema
        store.append(event(AuditDecision.REQUESTED))
    assert _count(postgres_log) == 1
    with open_audit_store(tmp_path / "audit.db") as store:
        assert isinstance(store, SqliteAuditStore)
    with open_audit_store(str(tmp_path / "other.db")) as store:
        assert isinstance(store, SqliteAuditStore)
    assert (tmp_path / "audit.db").is_file()
    assert (tmp_path / "other.db").is_file()
    assert split_audit_url("postgresql://u:p@h:5/db?sslmode=require&audit_schema=ops") == (
        "postgresql://u:p@h:5/db?sslmode=require",
        "ops",
    )
    assert split_audit_url("postgres://h/db") == ("postgres://h/db", DEFAULT_SCHEMA)


@pytest.mark.anyio
async def test_answers_are_recorded_once_under_concurrent_tasks(postgres_log: PostgresLog) -> None:
    store = postgres_log.open()
    try:
        await store.record(event(AuditDecision.REQUESTED, 5))
        results: list[object] = []

        async def answer(decision: AuditDecision) -> None:
            results.append(await store.record_answer(event(decision, 5)))

        async with anyio.create_task_group() as group:
            for decision in (AuditDecision.ACCEPTED, AuditDecision.DECLINED, AuditDecision.CANCELLED):
                group.start_soon(answer, decision)
        records = await store.query(AuditQuery(request_id="req-5"))
    finally:
        await store.aclose()
    assert sum(result is not None for result in results) == 1
    (answer,) = (result for result in results if result is not None)
    assert records == [records[0], answer]
    assert records[0].decision is AuditDecision.REQUESTED


def test_a_record_with_no_sequence_number_is_named(postgres_log: PostgresLog) -> None:
    """The superuser drops the primary key and adds a row with a NULL `seq`, which PostgreSQL sorts last: verify
    ended in a TypeError traceback at `int(seq)`."""
    fill(postgres_log, 3)
    with postgres_log.tampering() as db:
        db.execute("ALTER TABLE audit_log DROP CONSTRAINT audit_log_pkey")
        db.execute("ALTER TABLE audit_log ALTER COLUMN seq DROP NOT NULL")
        db.execute(
            "INSERT INTO audit_log SELECT NULL, time, 'accepted', request_id, target, caller, sql, classification, "
            "changes, justification, environment, rows_affected, error, hash, 'x' FROM audit_log WHERE seq = 3"
        )
    with postgres_log.open(readonly=True) as store:
        report = verify(store)
    assert report.finding is not None
    assert (report.finding.kind, report.checked) == (Tampering.INSERTED, 3)
    assert report.summary() == (
        "Audit log NOT intact: a record was inserted after record 3, where the head anchor says the log ends: its "
        "sequence number is NULL, not a whole number."
    )
