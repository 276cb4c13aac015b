"""Several processes on one PostgreSQL audit log at once: one chain with no gaps, and each answer counted once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from safedb.audit import AuditDecision, AuditQuery, verify
from tests.audit.helpers import event
from tests.audit.stores import PostgresLog

pytestmark = pytest.mark.slow

WORKERS = 6
APPENDS = 40
QUESTIONS = 30

_APPENDER = """
import sys
from safedb.audit import AuditDecision, AuditEvent, PostgresAuditStore

url, schema, worker, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with PostgresAuditStore.open(url, schema=schema) as store:
    for index in range(count):
        store.append(AuditEvent(AuditDecision.REQUESTED, request_id=f"{worker}:{index}", target="demo",
                                sql=f"DELETE FROM t WHERE id = {index}", caller=f"worker-{worker}"))
"""

# Opens the log, says it is ready, waits for "go" on stdin, then answers every question once and prints
# the request ids whose answer it recorded.
_ANSWERER = """
import json, sys
from safedb.audit import AnswerCheck, AuditDecision, AuditEvent, PostgresAuditStore

url, schema, decision, count = sys.argv[1], sys.argv[2], AuditDecision(sys.argv[3]), int(sys.argv[4])
with PostgresAuditStore.open(url, schema=schema) as store:
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    recorded = []
    for index in range(count):
        answer = AuditEvent(decision, f"req-{index}", "demo", f"DELETE FROM invoices WHERE id = {index}")
        if store.append(answer, AnswerCheck.ASKED) is not None:
            recorded.append(answer.request_id)
    print(json.dumps(recorded), flush=True)
"""


def _finish(processes: list[subprocess.Popen[str]]) -> list[str]:
    """Each process's stdout; fails with the stderr of any that failed. Every process is stopped."""
    outputs, failures = [], []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=120)
            outputs.append(stdout)
            if process.returncode != 0:
                failures.append(stderr)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert not failures, "\n".join(failures)
    return outputs


@pytest.mark.parametrize("created_first", [True, False], ids=["existing-schema", "racing-to-create"])
def test_processes_appending_at_once_make_one_valid_chain(postgres_log: PostgresLog, created_first: bool) -> None:
    if created_first:
        postgres_log.open().close()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, postgres_log.url, postgres_log.schema, str(worker), str(APPENDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(WORKERS)
    ]
    _finish(processes)

    with postgres_log.open(readonly=True) as store:
        report = verify(store)
        records = list(store.records(AuditQuery()))
    assert report.intact, report.summary()
    assert report.checked == WORKERS * APPENDS
    assert [record.seq for record in records] == list(range(1, WORKERS * APPENDS + 1))
    for worker in range(WORKERS):
        mine = [record.request_id for record in records if record.caller == f"worker-{worker}"]
        assert mine == [f"{worker}:{index}" for index in range(APPENDS)]
    times = [record.time for record in records]
    assert times == sorted(times)


def test_two_processes_racing_to_answer_record_one_answer_per_question(postgres_log: PostgresLog) -> None:
    with postgres_log.open() as store:
        for index in range(QUESTIONS):
            store.append(event(AuditDecision.REQUESTED, index))
    decisions = (AuditDecision.ACCEPTED, AuditDecision.DECLINED)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _ANSWERER, postgres_log.url, postgres_log.schema, decision.value, str(QUESTIONS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for decision in decisions
    ]
    for process in processes:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            _finish(processes)
            pytest.fail("an answering process did not start")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = _finish(processes)
    won = [set(json.loads(output.strip().splitlines()[-1])) for output in outputs]

    assert not won[0] & won[1]
    assert won[0] | won[1] == {f"req-{index}" for index in range(QUESTIONS)}
    with postgres_log.open(readonly=True) as store:
        records = list(store.records(AuditQuery()))
        assert verify(store).intact
    answers = [record for record in records if record.decision is not AuditDecision.REQUESTED]
    assert sorted(record.request_id for record in answers) == sorted(f"req-{index}" for index in range(QUESTIONS))
    for record in answers:
        winner = decisions[0] if record.request_id in won[0] else decisions[1]
        assert record.decision is winner
