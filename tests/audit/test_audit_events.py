"""Every kind of decision is recorded with all its fields, listed back, and filtered by."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from safedb.approval.verification import Verdict
from safedb.audit import (
    GENESIS_HASH,
    AuditDecision,
    AuditEvent,
    AuditQuery,
    SqliteAuditStore,
    Tampering,
    decision_for_verdict,
    verify,
)
from safedb.sql.classification import Change, ChangeKind, Classification, DatabaseObject, ObjectType
from tests.audit.helpers import event
from tests.audit.stores import AuditLog
from tests.helpers import watching_the_loop_while_locked

pytestmark = pytest.mark.anyio


async def test_every_decision_is_recorded_and_listed(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        written = [await store.record(event(decision, index)) for index, decision in enumerate(AuditDecision)]
        listed = await store.query(AuditQuery())
        assert listed == written
        assert [record.seq for record in listed] == list(range(1, len(AuditDecision) + 1))
        assert [record.decision for record in listed] == list(AuditDecision)
        for index, decision in enumerate(AuditDecision):
            (only,) = await store.query(AuditQuery(decisions=(decision,)))
            assert only.request_id == f"req-{index}"
            assert only.sql == f"DELETE FROM invoices WHERE id = {index}"
            assert only.caller == "pytest-client/1.0"
            assert only.target == "demo"
            assert only.classification == "data change (delete)"
            assert only.changes == ("delete table invoices",)
            assert only.time.endswith("Z")
        # Every record chains; but SafeDB never writes record 2, an `accepted` for a request never asked.
        report = verify(store)
        assert report.finding is not None
        assert (report.finding.kind, report.finding.seq, report.checked) == (Tampering.UNASKED_ANSWER, 2, 1)


async def test_outcome_fields_are_kept(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        for decision in AuditDecision:
            await store.record(event(decision))
        (executed,) = await store.query(AuditQuery(decisions=(AuditDecision.EXECUTED,)))
        (failed,) = await store.query(AuditQuery(decisions=(AuditDecision.FAILED,)))
        (accepted,) = await store.query(AuditQuery(decisions=(AuditDecision.ACCEPTED,)))
        (requested,) = await store.query(AuditQuery(decisions=(AuditDecision.REQUESTED,)))
    assert executed.rows_affected == 1
    assert executed.error is None
    assert failed.error == "The database reported an error: disk I/O error"
    assert failed.rows_affected is None
    assert (accepted.justification, accepted.environment) == ("cleanup of test rows", "Development")
    assert (requested.justification, requested.environment) == (None, None)


async def test_one_tool_call_from_classification_to_execution(audit_log: AuditLog) -> None:
    target = DatabaseObject(ObjectType.TABLE, "invoices")
    classification = Classification("DELETE FROM invoices WHERE id = 4", (Change(ChangeKind.DELETE, target),))
    requested = AuditEvent.about(
        AuditDecision.REQUESTED, classification, request_id="ticket-1", target="demo.db", caller="vscode"
    )
    accepted = requested.followed_by(AuditDecision.ACCEPTED, justification="wrong invoice", environment="Staging")
    executed = accepted.followed_by(AuditDecision.EXECUTED, rows_affected=1)
    with audit_log.open() as store:
        for item in (requested, accepted, executed):
            await store.record(item)
        await store.record(event(AuditDecision.REQUESTED, 99))
        records = await store.query(AuditQuery(request_id="ticket-1"))
    assert [record.decision for record in records] == ["requested", "accepted", "executed"]
    assert {record.sql for record in records} == {"DELETE FROM invoices WHERE id = 4"}
    assert {record.classification for record in records} == {"data change (delete)"}
    assert {record.changes for record in records} == {("delete table invoices",)}
    assert records[2].justification == "wrong invoice"
    assert records[2].environment == "Staging"
    assert records[2].rows_affected == 1
    assert records[0].prev_hash == GENESIS_HASH
    assert records[1].prev_hash == records[0].hash
    assert records[2].prev_hash == records[1].hash


@pytest.mark.parametrize("verdict", list(Verdict))
def test_every_verdict_has_an_audit_decision(verdict: Verdict) -> None:
    decision = decision_for_verdict(verdict)
    assert decision in AuditDecision
    if verdict.value in {d.value for d in AuditDecision}:
        assert decision.value == verdict.value


async def test_concurrent_records_from_one_event_loop_chain_in_order(audit_log: AuditLog) -> None:
    with audit_log.open() as store:
        async with anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(store.record, event(AuditDecision.REQUESTED, index))
        records = await store.query(AuditQuery())
        report = verify(store)
    assert report.intact, report.summary()
    assert [record.seq for record in records] == list(range(1, 51))
    assert sorted(record.request_id for record in records) == sorted(f"req-{i}" for i in range(50))


async def test_an_answer_waits_for_another_connections_lock_without_holding_up_the_event_loop(
    audit_path: Path,
) -> None:
    """Appends run on the event loop's thread only when they need not wait: while another connection (or
    process) holds the file's write lock, they wait in a worker thread, and each answer still counts once."""
    with SqliteAuditStore.open(audit_path) as store:
        await store.record(event(AuditDecision.REQUESTED, 1))
        answer, longest = await watching_the_loop_while_locked(
            audit_path, ["BEGIN IMMEDIATE"], lambda: store.record_answer(event(AuditDecision.ACCEPTED, 1))
        )
        assert answer is not None
        assert answer.seq == 2
        assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"
        assert await store.record_answer(event(AuditDecision.DECLINED, 1)) is None  # a replay
        executed = await store.record(event(AuditDecision.EXECUTED, 1))
        assert executed.seq == 3
        assert verify(store).intact
