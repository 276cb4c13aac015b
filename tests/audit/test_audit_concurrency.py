"""Several processes appending to one audit file at once: one chain, no gaps, nobody's record lost."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from safedb.audit import AuditDecision, AuditQuery, SqliteAuditStore, verify
from safedb.errors import DatabaseOpenError
from tests.audit.helpers import event

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


def test_opening_a_new_log_waits_for_another_connection_holding_it(audit_path: Path) -> None:
    """Switching a new file to WAL mode meets a lock held elsewhere (another server creating the same log) with
    "database is locked" at once, without SQLite's busy handler: opening waits for the lock instead of failing."""
    audit_path.parent.mkdir(parents=True)
    other = sqlite3.connect(audit_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.execute, ["COMMIT"])
    release.start()
    try:
        with SqliteAuditStore.open(audit_path, busy_timeout=10) as store:
            store.append(event(AuditDecision.REQUESTED, 1))
    finally:
        release.join()
        other.close()
    with SqliteAuditStore.open(audit_path, readonly=True) as store:
        assert verify(store).checked == 1


def test_opening_a_log_held_longer_than_the_busy_timeout_says_so(audit_path: Path) -> None:
    audit_path.parent.mkdir(parents=True)
    other = sqlite3.connect(audit_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseOpenError, match="database is locked"):
            SqliteAuditStore.open(audit_path, busy_timeout=0.2)
    finally:
        other.close()


@pytest.mark.anyio
async def test_appends_waiting_for_another_writer_take_one_worker_thread_between_them(audit_path: Path) -> None:
    """While another connection holds the file's write lock, appends wait in a worker thread, one at a time:
    many calls appending at once do not each take a thread (and its memory)."""
    with SqliteAuditStore.open(audit_path) as store:
        other = sqlite3.connect(audit_path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        threads_before = threading.active_count()
        try:
            async with anyio.create_task_group() as group:
                for index in range(20):
                    group.start_soon(store.record, event(AuditDecision.REQUESTED, index))
                await anyio.sleep(0.5)
                threads_waiting = threading.active_count() - threads_before
                other.execute("ROLLBACK")
        finally:
            other.close()
        assert threads_waiting <= 1
        assert len(list(store.records(AuditQuery()))) == 20
