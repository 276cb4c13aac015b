"""Checkpoints of the SQLite audit file, in a thread of their own.

A checkpoint copies the records in the -wal file into the audit file itself, so that the -wal file can
start over instead of growing. SQLite runs one by itself inside the commit that takes the -wal file past
1,000 pages: for SafeDB, an append on the event loop, which then waits for the checkpoint's two disk syncs
(up to 20 ms measured, every call of every session held up meanwhile). The store's writer turns that off
(`open_writer`), and `BackgroundCheckpoints` runs the same checkpoint in a thread every `CHECKPOINT_EVERY`
appends, while appends go on.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY = 200
"""Appends between checkpoints: about SQLite's own 1,000 pages, at the four or five pages an append writes."""


class BackgroundCheckpoints:
    """Starts a checkpoint thread every `CHECKPOINT_EVERY` commits of the store's writer (one at a time)."""

    def __init__(self, path: Path, store_lock: threading.Lock) -> None:
        self._path = path
        self._store_lock = store_lock
        self._last_commit = 0
        self._thread: threading.Thread | None = None
        self.finishing = False
        """A checkpoint waits for the store's lock to finish: appends should queue for it, not race it."""

    def committed(self, commit: int) -> None:
        """The writer made commit number `commit` (0: none); call under the store's write lock."""
        if commit - self._last_commit < CHECKPOINT_EVERY or (self._thread is not None and self._thread.is_alive()):
            return
        self._last_commit = commit
        self._thread = threading.Thread(target=self._checkpoint, name="safedb-audit-checkpoint", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a running checkpoint (call before the writer closes, without the store's lock)."""
        if self._thread is not None:
            self._thread.join()

    def _checkpoint(self) -> None:
        try:
            with contextlib.closing(sqlite3.connect(self._path, isolation_level=None)) as connection:
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                # Appends that landed meanwhile are copied too, with the next ones held off (they wait in
                # worker threads): the -wal file starts over only after a checkpoint that copied everything.
                # Little is left to copy by now, and nothing at all when no append landed.
                self.finishing = True
                try:
                    with self._store_lock:
                        connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    self.finishing = False
        except sqlite3.Error as exc:  # the records are safe in the -wal file; the next checkpoint tries again
            logger.warning("Cannot checkpoint the audit log %s: %s", self._path, exc)
