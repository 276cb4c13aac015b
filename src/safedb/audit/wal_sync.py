"""When the SQLite audit file's records reach the disk.

The writer commits with `PRAGMA synchronous = NORMAL`: SQLite writes each commit to the `-wal` file (so
a crash of SafeDB itself loses nothing) without waiting for the disk, and `WalSync` fsyncs that file.
A sync covers every commit written before it, in order: the log on the disk is always a prefix of the
log SafeDB wrote. Records that something waits on (a person's answer, before a statement runs) are
synced before the append returns, as `synchronous = FULL` would; the others are synced with the next
such record, or in the background within `LAZY_SYNC_DELAY`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading

logger = logging.getLogger(__name__)

LAZY_SYNC_DELAY = 0.1
"""Seconds a record that nothing waits on may stay unsynced (only a power loss or an OS crash can lose it)."""


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

    def committed(self) -> int:
        """Note one more commit (called under the store's write lock); its number."""
        self._last_commit += 1
        return self._last_commit

    def sync_through(self, commit: int) -> None:
        """Return once the log is on the disk through `commit`, syncing it if need be. OSError if it cannot."""
        with self._lock:
            if self._last_synced < commit:
                self._sync()

    def _sync(self) -> None:
        """Sync every commit counted so far: each has been written to the file. Call under `_lock`."""
        if self._fd < 0:
            raise OSError(errno.EBADF, "the audit log is closed")
        through = self._last_commit
        _sync_data(self._fd)
        self._last_synced = through

    def sync_soon(self) -> None:
        """Have every commit so far synced within `LAZY_SYNC_DELAY`, in a worker thread (call on the event
        loop)."""
        if self._background_sync_due:
            return
        self._background_sync_due = True
        loop = asyncio.get_running_loop()
        loop.call_later(LAZY_SYNC_DELAY, lambda: loop.run_in_executor(None, self._sync_in_background))

    def _sync_in_background(self) -> None:
        self._background_sync_due = False
        try:
            self.sync_through(self._last_commit)
        except OSError as exc:
            # The next decision syncs again, and fails its statement if the disk still refuses.
            logger.error("Cannot sync the audit log to disk: %s", exc)

    def close(self) -> None:
        """Sync what is left, and let go of the file."""
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


def _sync_data(fd: int) -> None:
    """Sync the file's data and the metadata needed to read it back (its size), not the rest (times), as
    SQLite syncs its own files; `fsync` where the system has no `fdatasync`."""
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)
