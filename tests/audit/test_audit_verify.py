"""`verify` finds the first edited, deleted or inserted record and names it.

Each test tampers the way someone with the file (or the superuser of the PostgreSQL server) would: through
a connection of their own, after dropping or disabling the triggers that refuse changes. Every test runs
against both stores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from safedb.audit import (
    AuditDecision,
    AuditRecord,
    Tampering,
    VerificationReport,
    verify,
)
from safedb.audit.chain import chain_hash
from tests.audit.helpers import event, fill, insert_row, shift_seqs
from tests.audit.stores import AuditLog, SqliteLog


def _verify(log: AuditLog) -> VerificationReport:
    with log.open(readonly=True) as store:
        return verify(store)


def _assert_finding(report: VerificationReport, kind: Tampering, seq: int | None) -> None:
    assert not report.intact
    assert report.finding is not None
    assert (report.finding.kind, report.finding.seq) == (kind, seq), report.summary()
    if seq is not None:
        assert f"record {seq} " in report.summary() or f"records {seq} " in report.summary()


def test_an_untouched_log_verifies(audit_log: AuditLog) -> None:
    records = fill(audit_log, 12)
    report = _verify(audit_log)
    assert report.intact, report.summary()
    assert report.checked == 12
    assert report.head is not None
    assert (report.head.seq, report.head.hash) == (12, records[-1].hash)
    assert report.summary() == f"Audit log intact: 12 records; last record 12, hash {records[-1].hash}."


def test_an_empty_log_verifies(audit_log: AuditLog) -> None:
    audit_log.open().close()
    report = _verify(audit_log)
    assert report.intact
    assert report.checked == 0


def test_edited_record(audit_log: AuditLog) -> None:
    fill(audit_log, 8)
    with audit_log.tampering() as db:
        db.execute("UPDATE audit_log SET decision = 'accepted', justification = 'approved' WHERE seq = 5")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.EDITED, 5)
    assert report.checked == 4
    assert report.summary() == "Audit log NOT intact: record 5 was edited: its contents do not match its hash."


def test_edited_changes_list(audit_log: AuditLog) -> None:
    fill(audit_log, 4)
    with audit_log.tampering() as db:
        db.execute("UPDATE audit_log SET changes = 'garbage' WHERE seq = 2")
    _assert_finding(_verify(audit_log), Tampering.EDITED, 2)


def test_edited_last_record(audit_log: AuditLog) -> None:
    fill(audit_log, 4)
    with audit_log.tampering() as db:
        db.execute("UPDATE audit_log SET rows_affected = 0 WHERE seq = 4")
    _assert_finding(_verify(audit_log), Tampering.EDITED, 4)


def test_edited_record_with_its_hash_recomputed(audit_log: AuditLog) -> None:
    records = fill(audit_log, 6)
    forged = AuditRecord.chained(
        event(AuditDecision.DECLINED, 99), seq=3, time=records[2].time, prev_hash=records[1].hash
    )
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 3")
        insert_row(db, forged)
    report = _verify(audit_log)
    _assert_finding(report, Tampering.EDITED, 3)
    assert "record 4 chains from a hash that record 3 no longer has" in report.summary()


def test_last_record_rewritten_with_its_hash_recomputed(audit_log: AuditLog) -> None:
    records = fill(audit_log, 5)
    forged = AuditRecord.chained(event(AuditDecision.DECLINED, 99), seq=5, time=records[4].time,
                                 prev_hash=records[3].hash)  # fmt: skip
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 5")
        insert_row(db, forged)
    report = _verify(audit_log)
    _assert_finding(report, Tampering.EDITED, 5)
    assert "head anchor" in report.summary()


def test_deleted_middle_record(audit_log: AuditLog) -> None:
    fill(audit_log, 9)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 4")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.DELETED, 4)
    assert report.summary() == "Audit log NOT intact: record 4 was deleted: the sequence jumps from 3 to 5."


def test_deleted_middle_records_hidden_by_renumbering(audit_log: AuditLog) -> None:
    fill(audit_log, 10)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq IN (4, 5)")
        shift_seqs(db, 6, -2)
        db.execute("UPDATE audit_head SET seq = 8, hash = (SELECT hash FROM audit_log WHERE seq = 8)")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.DELETED, 4)
    assert "records 4 to 5 were deleted: record 6 was renumbered to 4" in report.summary()


def test_deleted_first_record(audit_log: AuditLog) -> None:
    fill(audit_log, 3)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 1")
    _assert_finding(_verify(audit_log), Tampering.DELETED, 1)


def test_deleted_last_record(audit_log: AuditLog) -> None:
    fill(audit_log, 7)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 7")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.DELETED, 7)
    assert report.checked == 6
    assert "the head anchor says the last record is 7" in report.summary()


def test_deleted_last_records(audit_log: AuditLog) -> None:
    fill(audit_log, 7)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq >= 5")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.DELETED, 5)
    assert "records 5 to 7 were deleted" in report.summary()


def test_deleted_everything(audit_log: AuditLog) -> None:
    fill(audit_log, 3)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log")
    _assert_finding(_verify(audit_log), Tampering.DELETED, 1)


def test_deleted_head_anchor(audit_log: AuditLog) -> None:
    fill(audit_log, 3)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_head")
    _assert_finding(_verify(audit_log), Tampering.HEAD_MISSING, None)


def test_head_anchor_that_is_not_a_number(audit_path: Path) -> None:
    # Only SQLite can hold it: its columns take any type of value.
    audit_log = SqliteLog(audit_path)
    fill(audit_log, 3)
    with audit_log.tampering() as db:
        db.execute("UPDATE audit_head SET seq = 'three'")
    report = _verify(audit_log)
    _assert_finding(report, Tampering.HEAD_MISSING, None)
    assert "the head anchor is missing or unreadable" in report.summary()


def test_inserted_record_with_a_valid_hash_and_the_rest_renumbered(audit_log: AuditLog) -> None:
    records = fill(audit_log, 8)
    forged = AuditRecord.chained(
        event(AuditDecision.ACCEPTED, 99), seq=4, time=records[3].time, prev_hash=records[2].hash
    )
    with audit_log.tampering() as db:
        shift_seqs(db, 4, 1)
        insert_row(db, forged)
    report = _verify(audit_log)
    _assert_finding(report, Tampering.INSERTED, 4)
    assert report.checked == 3
    assert "records 4 and 5 both chain from record 3" in report.summary()


def test_inserted_copy_of_a_record(audit_log: AuditLog) -> None:
    fill(audit_log, 6)
    with audit_log.tampering() as db:
        shift_seqs(db, 3, 1)
        db.execute(
            "INSERT INTO audit_log SELECT 3, time, decision, 'req-x', target, caller, sql, classification, changes, "
            "justification, environment, rows_affected, error, prev_hash, hash FROM audit_log WHERE seq = 2"
        )
    _assert_finding(_verify(audit_log), Tampering.INSERTED, 3)


def test_inserted_record_with_made_up_hashes(audit_log: AuditLog) -> None:
    records = fill(audit_log, 6)
    made_up = AuditRecord.chained(event(AuditDecision.EXECUTED, 99), seq=3, time=records[2].time,
                                  prev_hash="f" * 64)  # fmt: skip
    with audit_log.tampering() as db:
        shift_seqs(db, 3, 1)
        insert_row(db, made_up)
    report = _verify(audit_log)
    _assert_finding(report, Tampering.INSERTED, 3)
    assert "record 4 chains from record 2, skipping it" in report.summary()


def test_inserted_record_at_the_end(audit_log: AuditLog) -> None:
    records = fill(audit_log, 5)
    forged = AuditRecord.chained(event(AuditDecision.ACCEPTED, 99), seq=6, time=records[4].time,
                                 prev_hash=records[4].hash)  # fmt: skip
    with audit_log.tampering() as db:
        insert_row(db, forged)
    report = _verify(audit_log)
    _assert_finding(report, Tampering.INSERTED, 6)
    assert "head anchor says the last record SafeDB wrote is 5" in report.summary()


def test_appending_after_tampering_keeps_the_evidence(audit_log: AuditLog) -> None:
    fill(audit_log, 5)
    with audit_log.tampering() as db:
        db.execute("DELETE FROM audit_log WHERE seq = 5")
    with audit_log.open() as store:
        record = store.append(event(AuditDecision.REQUESTED, 6))
    assert record.seq == 6
    _assert_finding(_verify(audit_log), Tampering.DELETED, 5)


def test_hashes_are_sha256_over_canonical_json(audit_log: AuditLog) -> None:
    (first, second) = fill(audit_log, 2)
    content = second.content()
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert second.hash == hashlib.sha256(canonical.encode()).hexdigest() == chain_hash(content)
    assert second.prev_hash == first.hash
