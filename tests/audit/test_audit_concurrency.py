"""Several processes appending to one audit file at once: one chain, no gaps, nobody's record lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from safedb.audit import AuditQuery, SqliteAuditStore, verify

WORKERS = 6
APPENDS = 40

_WORKER = """
import sys
from pathlib import Path
from safedb.audit import AuditDecision, AuditEvent, SqliteAuditStore

path, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with SqliteAuditStore.open(path) as store:
    for index in range(count):
        store.append(AuditEvent(AuditDecision.REQUESTED, request_id=f"{worker}:{index}", target="demo",
                                sql=f"DELETE FROM t WHERE id = {index}", caller=f"worker-{worker}"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("created_first", [True, False], ids=["existing-file", "racing-to-create"])
def test_processes_appending_at_once_make_one_valid_chain(audit_path: Path, created_first: bool) -> None:
    if created_first:
        SqliteAuditStore.open(audit_path).close()
    else:
        audit_path.parent.mkdir(parents=True)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(audit_path), str(worker), str(APPENDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(WORKERS)
    ]
    failures = []
    try:
        for process in processes:
            _, stderr = process.communicate(timeout=120)
            if process.returncode != 0:
                failures.append(stderr)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert not failures, "\n".join(failures)

    with SqliteAuditStore.open(audit_path, readonly=True) as store:
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
