"""`verify` names an answer that answers no question the log holds, which the hash chain alone cannot show.

Whoever can write the log can append records that chain correctly, through its own triggers: the hashes are not
keyed. SafeDB writes an answer only after its question; an answer without one (an `accepted` for a request never
asked) was added by someone else. And every log the server itself writes still verifies.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.audit import AuditDecision, AuditEvent, AuditQuery, AuditRecord, Tampering, verify
from safedb.settings import Policy
from tests.audit.helpers import accepted_unasked, event, fill, insert_row
from tests.audit.stores import AuditLog
from tests.helpers import Responder, in_process_server, rows

FORGED_JUSTIFICATION = "alice: approved in the change meeting"


def _append_through_the_triggers(log: AuditLog, forged: AuditEvent) -> AuditRecord:
    """Append `forged` as the next record, chained and with the head anchor moved, as SafeDB's own role: no
    trigger dropped or disabled."""
    with log.open(readonly=True) as store:
        last = list(store.records(AuditQuery(limit=1)))[-1]
    record = AuditRecord.chained(forged, seq=last.seq + 1, time=last.time, prev_hash=last.hash)
    with log.connect() as db:
        insert_row(db, record)
        db.execute("UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1", (record.seq, record.hash))
        db.commit()
    return record


@pytest.mark.parametrize(
    "forged",
    [
        # An approval of a request that was never asked (red team, p11_forged_append.py).
        replace(event(AuditDecision.ACCEPTED, 9), justification=FORGED_JUSTIFICATION, environment="Production"),
        event(AuditDecision.DECLINED, 9),
        event(AuditDecision.TIMED_OUT, 9),
        # req-0 was asked and answered (accepted, then executed): a second answer is not SafeDB's.
        event(AuditDecision.ACCEPTED, 0),
        # req-3 was asked and declined.
        replace(event(AuditDecision.ACCEPTED, 3), justification=FORGED_JUSTIFICATION),
        # A question of req-3, answered about another statement.
        replace(event(AuditDecision.ACCEPTED, 3), sql="DROP TABLE invoices"),
    ],
    ids=["accepted-never-asked", "declined-never-asked", "timed-out-never-asked", "second-answer",
         "answer-after-a-decline", "another-statement"],
)  # fmt: skip
def test_an_answer_appended_through_the_triggers_is_named(audit_log: AuditLog, forged: AuditEvent) -> None:
    fill(audit_log, 10)
    if forged.sql == "DROP TABLE invoices":  # its question must be open: ask req-3 again, then answer another one
        _append_through_the_triggers(audit_log, event(AuditDecision.REQUESTED, 3))
    record = _append_through_the_triggers(audit_log, forged)
    with audit_log.open(readonly=True) as store:
        report = verify(store)
    assert report.finding is not None, report.summary()
    assert (report.finding.kind, report.finding.seq, report.checked) == (
        Tampering.UNASKED_ANSWER, record.seq, record.seq - 1
    )  # fmt: skip
    assert report.summary() == (
        f"Audit log NOT intact: record {record.seq} was added outside SafeDB: it answers ({forged.decision}) a "
        "question the log does not hold (no unanswered `requested` record of the same request, target and statement "
        "comes before it)."
    )


def test_a_chain_finding_is_named_before_an_answer_with_no_question(audit_log: AuditLog) -> None:
    """A forged answer later in the log does not hide an edit earlier on."""
    fill(audit_log, 6)
    with audit_log.tampering() as db:
        db.execute("UPDATE audit_log SET sql = 'SELECT 1' WHERE seq = 5")
    _append_through_the_triggers(audit_log, event(AuditDecision.ACCEPTED, 9))
    with audit_log.open(readonly=True) as store:
        report = verify(store)
    assert report.finding is not None
    assert (report.finding.kind, report.finding.seq) == (Tampering.EDITED, 5), report.summary()


def test_decisions_safedb_writes_with_no_question_verify(audit_log: AuditLog) -> None:
    """A change the policy runs unasked, refusals and policy blocks have no `requested` record before them."""
    with audit_log.open() as store:
        store.append(accepted_unasked(1))
        store.append(event(AuditDecision.EXECUTED, 1))
        store.append(event(AuditDecision.BLOCKED, 2))
        store.append(event(AuditDecision.REFUSED, 3))
        store.append(event(AuditDecision.FAILED, 4))
        store.append(event(AuditDecision.REQUESTED, 5))
        store.append(event(AuditDecision.REFUSED, 5))  # the question could not be put after all
        report = verify(store)
    assert report.intact, report.summary()
    assert report.checked == 7


@pytest.mark.anyio
async def test_a_log_the_server_writes_with_and_without_questions_verifies(demo_db: Path) -> None:
    """The server's own records: a change run unasked (its `accepted` has no question), a refusal of a client
    that cannot be asked, a statement refused outright, and an approved one."""
    unasked = Policy(ask=frozenset())
    async with in_process_server(demo_db, policy=unasked) as (server, _), Client(server) as client:
        ran = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 1"})
    assert ran.structured_content is not None
    assert ran.structured_content["status"] == "executed"
    async with in_process_server(demo_db) as (server, audit):
        async with Client(server) as client:  # declares no elicitation capability
            refused = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 2"})
        async with Client(server, elicitation_callback=Responder()) as client:
            outright = await client.call_tool("execute_query", {"query": "BEGIN"})
            approved = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 3"})
        records = list(audit.records(AuditQuery()))
        report = verify(audit)
    assert [refused.is_error, outright.is_error, approved.is_error] == [True, True, False]
    assert rows(demo_db, "SELECT id FROM invoices WHERE id <= 3") == [(2,)]
    decisions = [str(record.decision) for record in records]
    assert decisions == ["accepted", "executed", "refused", "refused", "requested", "accepted", "executed"]
    assert report.intact, report.summary()
