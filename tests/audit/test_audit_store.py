"""The audit stores: append-only by their own triggers, filters, reopening, refusing what is not an audit log.

Tests taking `audit_log` run against both stores; the others are about the SQLite file.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from safedb.audit import (
    AnswerCheck,
    AuditDecision,
    AuditQuery,
    AuditRecord,
    AuditWriteFailed,
    QuestionNotRecorded,
    SqliteAuditStore,
    parse_time,
    verify,
)
from safedb.errors import DatabaseOpenError
from tests.audit.helpers import event, fill
from tests.audit.stores import AuditLog


def _head(log: AuditLog) -> tuple[int, str]:
    with log.connect() as connection:
        seq, hash_ = connection.execute("SELECT seq, hash FROM audit_head").fetchone()
        return seq, hash_


def test_file_is_created_in_wal_mode_readable_by_owner_only(audit_path: Path) -> None:
    fill(audit_path, 1)
    connection = sqlite3.connect(audit_path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        connection.close()
    assert stat.S_IMODE(os.stat(audit_path).st_mode) == 0o600


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET sql = 'SELECT 1' WHERE seq = 2",
        "DELETE FROM audit_log WHERE seq = 3",
        "DELETE FROM audit_log",
        "UPDATE audit_head SET seq = 1",
        "UPDATE audit_head SET id = 2, seq = 4",
        "DELETE FROM audit_head",
        "INSERT INTO audit_log SELECT 2, time, decision, request_id, target, caller, sql, classification, changes, "
        "justification, environment, rows_affected, error, prev_hash, hash FROM audit_log WHERE seq = 1",
        "INSERT INTO audit_log SELECT 4, time, decision, request_id, target, caller, sql, classification, changes, "
        "justification, environment, rows_affected, error, prev_hash, hash FROM audit_log WHERE seq = 1",
    ],
)
def test_triggers_refuse_changes_through_any_connection(audit_log: AuditLog, statement: str) -> None:
    records = fill(audit_log, 3)
    with audit_log.connect() as connection:
        with pytest.raises(audit_log.errors, match=r"append-only|audit head|UNIQUE"):
            connection.execute(statement)
        connection.rollback()
        assert connection.execute("SELECT count(*) FROM audit_log").fetchone() == (3,)
    assert _head(audit_log) == (3, records[-1].hash)
    with audit_log.open(readonly=True) as store:
        assert verify(store).intact


def test_head_anchor_follows_every_append(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        for index in range(3):
            record = store.append(event(AuditDecision.REQUESTED, index))
            assert _head(audit_log) == (record.seq, record.hash)


def test_reopening_continues_the_chain(audit_log: AuditLog) -> None:
    first = fill(audit_log, 2)
    again = fill(audit_log, 2)
    assert [record.seq for record in again] == [3, 4]
    assert again[0].prev_hash == first[-1].hash
    with audit_log.open(readonly=True) as store:
        report = verify(store)
    assert report.intact
    assert report.checked == 4


def test_filters(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        for index in range(6):
            store.append(event(AuditDecision.REQUESTED, index, target="alpha" if index % 2 else "beta"))
        store.append(event(AuditDecision.EXECUTED, 6, target="alpha"))

        def seqs(query: AuditQuery) -> list[int]:
            return [record.seq for record in store.records(query)]

        assert seqs(AuditQuery(target="alpha")) == [2, 4, 6, 7]
        assert seqs(AuditQuery(target="alpha", decisions=(AuditDecision.EXECUTED,))) == [7]
        assert seqs(AuditQuery(decisions=(AuditDecision.EXECUTED, AuditDecision.REQUESTED), limit=3)) == [5, 6, 7]
        assert seqs(AuditQuery(target="gamma")) == []
        times = [record.time for record in store.records(AuditQuery())]
        assert times == sorted(times)
        assert seqs(AuditQuery(since=times[3])) == [4, 5, 6, 7]
        assert seqs(AuditQuery(until=times[3])) == [1, 2, 3]
        hour_ago = parse_time((datetime.now(UTC) - timedelta(hours=1)).isoformat())
        assert seqs(AuditQuery(until=hour_ago)) == []
        assert len(seqs(AuditQuery(since=hour_ago))) == 7


def test_times_parse_with_and_without_zones() -> None:
    assert parse_time("2025-06-01") == "2025-06-01T00:00:00.000000Z"
    assert parse_time("2025-06-01T14:30:00+02:00") == "2025-06-01T12:30:00.000000Z"
    assert parse_time("2025-06-01T12:30Z") == "2025-06-01T12:30:00.000000Z"
    with pytest.raises(ValueError, match="Invalid isoformat"):
        parse_time("last tuesday")


def test_text_that_utf8_cannot_hold_is_kept_escaped(audit_path: Path) -> None:
    tricky = event(AuditDecision.REQUESTED)
    tricky = tricky.followed_by(AuditDecision.REQUESTED, sql="SELECT '\ud800', 'naïve ✓', 'nul\x00byte'")
    with SqliteAuditStore.open(audit_path) as store:
        written = store.append(tricky)
        (read,) = store.records(AuditQuery())
        assert verify(store).intact
    assert read == written
    assert read.sql == "SELECT '\\ud800', 'naïve ✓', 'nul\x00byte'"


def test_readonly_store_cannot_append(audit_log: AuditLog) -> None:
    fill(audit_log, 1)
    with audit_log.open(readonly=True) as store, pytest.raises(AuditWriteFailed):
        store.append(event(AuditDecision.REQUESTED))


def test_missing_file_is_not_created_when_reading(audit_path: Path) -> None:
    with pytest.raises(DatabaseOpenError, match="Audit log not found"):
        SqliteAuditStore.open(audit_path, readonly=True)
    assert not audit_path.exists()


@pytest.mark.parametrize("readonly", [True, False])
def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path, readonly: bool) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("not a database\n" * 200)
    with pytest.raises(DatabaseOpenError, match="not an SQLite database"):
        SqliteAuditStore.open(bogus, readonly=readonly)
    assert bogus.read_text() == "not a database\n" * 200


@pytest.mark.parametrize("readonly", [True, False])
def test_another_sqlite_database_is_refused_and_left_alone(tmp_path: Path, readonly: bool) -> None:
    other = tmp_path / "app.db"
    connection = sqlite3.connect(other)
    try:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        connection.commit()
    finally:
        connection.close()
    with pytest.raises(DatabaseOpenError, match="not a SafeDB audit log"):
        SqliteAuditStore.open(other, readonly=readonly)
    connection = sqlite3.connect(other)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        connection.close()
    assert tables == {"users"}


def test_records_round_trip_through_their_content(audit_log: AuditLog) -> None:
    (record,) = fill(audit_log, 1)
    assert AuditRecord.from_content(record.content(), record.hash) == record
    assert list(record.to_dict()) == [*record.content(), "hash"]


def test_an_answer_is_recorded_once_per_question(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        asked = store.append(event(AuditDecision.REQUESTED, 7))
        first = store.append(event(AuditDecision.ACCEPTED, 7), AnswerCheck.ASKED)
        again = store.append(event(AuditDecision.DECLINED, 7), AnswerCheck.ASKED)
        other = store.append(event(AuditDecision.DECLINED, 8), AnswerCheck.UNASKED)
        decisions = [(r.request_id, str(r.decision)) for r in store.records(AuditQuery())]
    assert first is not None
    assert again is None
    assert other is not None
    assert decisions == [
        (asked.request_id, "requested"), (first.request_id, "accepted"), (other.request_id, "declined"),
    ]  # fmt: skip


def test_an_answer_counts_only_for_a_question_the_log_holds(audit_log: AuditLog) -> None:
    """Another server (sharing the request-state key, not the log) asked `req-1`: this log holds no question of
    that request, or one about another statement or target. Such answers are refused and leave no record."""
    with audit_log.open() as store:
        store.append(event(AuditDecision.REQUESTED, 2))
        store.append(event(AuditDecision.REQUESTED, 3, target="other"))
        elsewhere = event(AuditDecision.ACCEPTED, 1)
        for answer in (
            elsewhere,
            dataclasses.replace(elsewhere, request_id="req-2"),  # req-2's question is about another statement
            event(AuditDecision.ACCEPTED, 3),  # req-3's question is about another target
        ):
            with pytest.raises(QuestionNotRecorded):
                store.append(answer, AnswerCheck.ASKED)
        answered = store.append(event(AuditDecision.ACCEPTED, 2), AnswerCheck.ASKED)
        unasked = store.append(elsewhere, AnswerCheck.UNASKED)  # a change the policy lets run unasked
        decisions = [(r.request_id, str(r.decision)) for r in store.records(AuditQuery())]
    assert answered is not None
    assert unasked is not None
    assert decisions == [("req-2", "requested"), ("req-3", "requested"), ("req-2", "accepted"), ("req-1", "accepted")]
