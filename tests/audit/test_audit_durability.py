"""When SQLite audit records reach the disk: answers before they count, other records within a moment,
everything at close, and nothing lost when the server process dies."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from safedb.audit import AnswerCheck, AuditDecision, AuditQuery, AuditWriteFailed, SqliteAuditStore, verify
from safedb.audit.wal_sync import LAZY_SYNC_DELAY
from tests.audit.helpers import event

pytestmark = pytest.mark.anyio

Fsync = Callable[[int], None]


class DiskSyncs:
    """Counts the syncs of one file and notes the thread of each, passing them on to the real `os.fdatasync`
    (`os.fsync` where there is none), failing them on demand, or making them as slow as a busy disk (`seconds`)."""

    def __init__(self, real_fsync: Fsync) -> None:
        self._real_fsync = real_fsync
        self.inode: int | None = None
        self.count = 0
        self.threads: list[int] = []
        self.failing = False
        self.seconds = 0.0

    def __call__(self, fd: int) -> None:
        if self.inode is not None and os.fstat(fd).st_ino == self.inode:
            if self.failing:
                raise OSError(errno.EIO, "Input/output error")
            time.sleep(self.seconds)
            self.count += 1
            self.threads.append(threading.get_ident())
        self._real_fsync(fd)

    def watch(self, path: Path) -> None:
        self.inode = os.stat(path).st_ino


@pytest.fixture
def wal_syncs(monkeypatch: pytest.MonkeyPatch) -> DiskSyncs:
    name = "fdatasync" if hasattr(os, "fdatasync") else "fsync"
    syncs = DiskSyncs(getattr(os, name))
    monkeypatch.setattr(os, name, syncs)
    return syncs


def _wal(audit_path: Path) -> Path:
    return audit_path.with_name(audit_path.name + "-wal")


async def test_an_answer_is_on_disk_before_it_counts_and_one_sync_covers_the_records_before_it(
    audit_path: Path, wal_syncs: DiskSyncs
) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        for index in range(3):
            await store.record(event(AuditDecision.REQUESTED, index))
        assert wal_syncs.count == 0, "records nothing waits on are synced later, together"
        answer = await store.record_answer(event(AuditDecision.ACCEPTED, 0))
        assert answer is not None
        assert wal_syncs.count == 1, "the answer, and the three records before it, in one sync"


async def test_on_a_quick_disk_an_answer_is_synced_on_the_event_loops_own_thread(
    audit_path: Path, wal_syncs: DiskSyncs
) -> None:
    """Handing the sync to another thread and back would cost the busy event loop more than the sync itself."""
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        for index in range(3):
            assert await store.record_answer(event(AuditDecision.ACCEPTED, index), AnswerCheck.UNASKED) is not None
        assert wal_syncs.threads == [threading.get_ident()] * 3


async def slow_syncs_learned(store: SqliteAuditStore, wal_syncs: DiskSyncs) -> None:
    """Make the disk slow, and answer until the store has learned it: each answer's sync held the event loop up
    (four at most: the running average crosses the budget after three, and one retry follows at once), and the
    next goes to the store's sync thread."""
    wal_syncs.seconds = 0.05
    loop_thread = threading.get_ident()
    for index in range(100, 110):
        synced_before = wal_syncs.count
        assert await store.record_answer(event(AuditDecision.ACCEPTED, index), AnswerCheck.UNASKED) is not None
        assert wal_syncs.count == synced_before + 1
        if wal_syncs.threads[-1] != loop_thread:
            assert index - 100 <= 4, "a slow disk held the event loop up for more than four answers"
            return
    raise AssertionError("answers on a slow disk were still synced on the event loop's thread")


async def test_on_a_slow_disk_the_event_loop_serves_other_work_while_an_answer_is_synced(
    audit_path: Path, wal_syncs: DiskSyncs
) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        await slow_syncs_learned(store, wal_syncs)
        wal_syncs.seconds = 0.3
        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            await anyio.sleep(0)
            started = ticks
            synced_before = wal_syncs.count
            answer = await store.record_answer(event(AuditDecision.ACCEPTED, 1), AnswerCheck.UNASKED)
            assert answer is not None
            assert wal_syncs.count == synced_before + 1, "the answer is on the disk before record_answer returns"
            assert ticks - started >= 5, "other tasks ran while the disk synced"
            group.cancel_scope.cancel()


async def test_on_a_slow_disk_answers_waiting_together_share_one_sync(audit_path: Path, wal_syncs: DiskSyncs) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        await slow_syncs_learned(store, wal_syncs)
        wal_syncs.seconds = 0.3
        synced_before = wal_syncs.count
        answers: list[object] = []

        async def answer(index: int) -> None:
            answers.append(await store.record_answer(event(AuditDecision.ACCEPTED, index), AnswerCheck.UNASKED))

        async with anyio.create_task_group() as group:
            for index in range(6):
                group.start_soon(answer, index)
        assert len(answers) == 6
        assert None not in answers
        # The others arrive while the first answer's sync is under way (or before it starts): the next
        # sync (or that one) covers them all.
        assert 1 <= wal_syncs.count - synced_before <= 2, wal_syncs.count - synced_before
        # Each answer while learning was one record, synced on its own.
        assert [record.decision for record in store.records(AuditQuery())] == [AuditDecision.ACCEPTED] * (
            synced_before + 6
        )


async def test_other_records_reach_the_disk_within_a_moment(audit_path: Path, wal_syncs: DiskSyncs) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        await store.record(event(AuditDecision.EXECUTED, 1))
        await store.record(event(AuditDecision.REQUESTED, 2))
        assert wal_syncs.count == 0
        with anyio.fail_after(5):
            while wal_syncs.count == 0:
                await anyio.sleep(LAZY_SYNC_DELAY / 4)
        await anyio.sleep(LAZY_SYNC_DELAY * 3)
        assert wal_syncs.count == 1, "both records in one background sync"


def test_appends_outside_the_event_loop_are_synced_before_they_return(audit_path: Path, wal_syncs: DiskSyncs) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        store.append(event(AuditDecision.REQUESTED, 1))
        assert wal_syncs.count == 1
        assert store.append(event(AuditDecision.DECLINED, 1), AnswerCheck.ASKED) is not None
        assert wal_syncs.count == 2
        assert store.append(event(AuditDecision.DECLINED, 1), AnswerCheck.ASKED) is None  # a replay: nothing new
        assert wal_syncs.count == 2


async def test_closing_the_store_syncs_what_is_left(audit_path: Path, wal_syncs: DiskSyncs) -> None:
    store = SqliteAuditStore.open(audit_path)
    wal_syncs.watch(_wal(audit_path))
    await store.record(event(AuditDecision.REQUESTED, 1))
    assert wal_syncs.count == 0
    store.close()
    assert wal_syncs.count == 1


async def test_an_append_fails_when_the_disk_refuses_to_sync_it(audit_path: Path, wal_syncs: DiskSyncs) -> None:
    """The statement behind an answer runs only once the answer is on the disk."""
    with SqliteAuditStore.open(audit_path) as store:
        wal_syncs.watch(_wal(audit_path))
        await store.record(event(AuditDecision.REQUESTED, 1))
        wal_syncs.failing = True
        with pytest.raises(AuditWriteFailed, match="Input/output error"):
            await store.record_answer(event(AuditDecision.ACCEPTED, 1))
        with pytest.raises(AuditWriteFailed, match="Input/output error"):
            store.append(event(AuditDecision.EXECUTED, 1))
        wal_syncs.failing = False
        await store.record_answer(event(AuditDecision.ACCEPTED, 2), AnswerCheck.UNASKED)
        assert wal_syncs.count == 1


_APPEND_THEN_DIE = """
import asyncio, os, sys
from pathlib import Path
from safedb.audit import AuditDecision, SqliteAuditStore
from tests.audit.helpers import accepted_unasked, event

async def main():
    store = SqliteAuditStore.open(Path(sys.argv[1]))
    await store.record(accepted_unasked(1))
    await store.record(event(AuditDecision.EXECUTED, 1))
    os._exit(0)  # no close, no background sync: as if the server were killed

asyncio.run(main())
"""


def test_records_survive_the_server_process_dying_before_they_are_synced(audit_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-c", _APPEND_THEN_DIE, str(audit_path)],
        check=True,
        cwd=root,
        timeout=60,
    )
    with SqliteAuditStore.open(audit_path, readonly=True) as store:
        decisions = [record.decision for record in store.records(AuditQuery())]
        assert decisions == [AuditDecision.ACCEPTED, AuditDecision.EXECUTED]
        assert verify(store).intact
