"""When the SQLite audit file's records reach the disk.

The writer commits with `PRAGMA synchronous = NORMAL`: SQLite writes each commit to the `-wal` file (so
a crash of SafeDB itself loses nothing) without waiting for the disk, and `WalSync` fsyncs that file.
A sync covers every commit written before it, in order: the log on the disk is always a prefix of the
log SafeDB wrote. Records that something waits on (a person's answer, before a statement runs) are
synced before the append returns, as `synchronous = FULL` would; the others are synced with the next
such record, or in the background within `LAZY_SYNC_DELAY`.

An answer appended on the event loop's thread is synced there too while syncs have lately been quick
(`SYNC_ON_EVENT_LOOP_BUDGET`): handing a sync to another thread and back costs the busy event loop more CPU
than a quick sync. Otherwise a thread of the store's own syncs it, once for every append waiting by then,
while the event loop serves other calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import queue
import threading

from safedb.inline_work import RecentDuration

logger = logging.getLogger(__name__)

LAZY_SYNC_DELAY = 0.1
"""Seconds a record that nothing waits on may stay unsynced (only a power loss or an OS crash can lose it)."""

SYNC_ON_EVENT_LOOP_BUDGET = 0.0005
"""Seconds an answer's sync may take on the event loop's thread, on average lately (`RecentDuration`). The sync
thread's way costs the event loop some 0.2 to 0.5 ms of CPU per answer (waking the thread, and taking the GIL
back from it twice), which a sync of the -wal file on a quick disk (0.1 to 0.3 ms) undercuts."""

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]
_SOON = "soon"
_STOP = "stop"


class WalSync:
    """Counts the writer's commits and syncs the write-ahead log through a given one."""

    def __init__(self, wal_path: str) -> None:
        # SQLite keeps its -wal file while any connection is open, and the store's writer stays open, so
        # this descriptor names the live log until `close`. Opened for writing because some systems
        # refuse to fsync a read-only descriptor; nothing is written through it.
        self._fd = os.open(wal_path, os.O_RDWR)
        self._last_commit = 0
        self._last_synced = 0
        self._lock = threading.Lock()
        self._background_sync_due = False
        self._recent_syncs = RecentDuration(SYNC_ON_EVENT_LOOP_BUDGET)
        # Waiters from the event loop, `_SOON` for a sync within LAZY_SYNC_DELAY, or `_STOP`, for a thread
        # of its own: handing each sync to a pool's worker thread instead cost more than the sync itself.
        self._requests: queue.SimpleQueue[_Waiter | str] = queue.SimpleQueue()
        self._syncer = threading.Thread(target=self._serve_requests, name="safedb-audit-sync", daemon=True)
        self._syncer.start()

    def committed(self) -> int:
        """Note one more commit (called under the store's write lock); its number."""
        self._last_commit += 1
        return self._last_commit

    def sync_through(self, commit: int) -> None:
        """Return once the log is on the disk through `commit`, syncing it if need be. OSError if it cannot."""
        with self._lock:
            if self._last_synced < commit:
                self._sync()

    async def synced_through(self, commit: int) -> None:
        """`sync_through` for the event loop: on its own thread while syncs there have lately been quick and the
        sync thread is not syncing; otherwise the sync thread syncs while the loop serves other calls."""
        if self._last_synced >= commit:
            return
        if self._fd < 0:
            raise OSError(errno.EBADF, "the audit log is closed")
        if self._recent_syncs.within_budget() and self._lock.acquire(blocking=False):
            try:
                with self._recent_syncs.timing():
                    if self._last_synced < commit:
                        self._sync()
            finally:
                self._lock.release()
            return
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._requests.put((loop, done))
        await done

    def sync_soon(self) -> None:
        """Have every commit so far synced within `LAZY_SYNC_DELAY`, by the sync thread."""
        if not self._background_sync_due:
            self._background_sync_due = True
            self._requests.put(_SOON)

    def _sync(self) -> None:
        """Sync every commit counted so far: each has been written to the file. Call under `_lock`."""
        if self._fd < 0:
            raise OSError(errno.EBADF, "the audit log is closed")
        through = self._last_commit
        _sync_data(self._fd)
        self._last_synced = through

    def _serve_requests(self) -> None:
        while True:
            request = self._requests.get()
            if request is _SOON:
                with contextlib.suppress(queue.Empty):  # a waiter arriving meanwhile is served by the same sync
                    request = self._requests.get(timeout=LAZY_SYNC_DELAY)
            requests = [request]
            while requests[-1] is not _STOP and not self._requests.empty():
                requests.append(self._requests.get())
            waiters = [request for request in requests if isinstance(request, tuple)]
            self._background_sync_due = False  # before the sync: a commit after it asks for another
            error: OSError | None = None
            try:
                self.sync_through(self._last_commit)
            except OSError as exc:
                error = exc
                if not waiters:
                    # The next decision syncs again, and fails its statement if the disk still refuses.
                    logger.error("Cannot sync the audit log to disk: %s", exc)
            for loop, done in waiters:
                _settle(loop, done, error)
            if requests[-1] is _STOP:
                return

    def close(self) -> None:
        """Sync what is left, and let go of the file."""
        if self._syncer.is_alive():
            self._requests.put(_STOP)
            self._syncer.join()
        with self._lock:
            if self._fd < 0:
                return
            try:
                if self._last_synced < self._last_commit:
                    self._sync()
            except OSError as exc:
                logger.error("Cannot sync the audit log to disk as it closes: %s", exc)
            finally:
                os.close(self._fd)
                self._fd = -1


def _settle(loop: asyncio.AbstractEventLoop, done: asyncio.Future[None], error: OSError | None) -> None:
    """Tell a waiter on `loop` that its sync is done (or failed), unless that loop has already closed."""

    def settle() -> None:
        if done.done():  # its caller was cancelled
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)


def _sync_data(fd: int) -> None:
    """Sync the file's data and the metadata needed to read it back (its size), not the rest (times), as
    SQLite syncs its own files; `fsync` where the system has no `fdatasync`."""
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)
