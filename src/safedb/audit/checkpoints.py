"""Checkpoints of the SQLite audit file, off the event loop.

A checkpoint copies the records in the -wal file into the audit file itself, so that the -wal file can
start over instead of growing. SQLite runs one by itself inside the commit that takes the -wal file past
1,000 pages: for SafeDB, an append on the event loop, which then waits for the checkpoint's two disk syncs
(up to 20 ms measured, every call of every session held up meanwhile). The store's writer turns that off
(`open_writer`), and `BackgroundCheckpoints` runs the same checkpoint every `CHECKPOINT_EVERY` appends in a
worker thread, through a connection of its own, while appends go on.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY = 200
"""Appends between checkpoints: about SQLite's own 1,000 pages, at the four or five pages an append writes."""


class BackgroundCheckpoints:
    """Checkpoints the audit file at `path` every `CHECKPOINT_EVERY` commits of the store's writer, one at a
    time. Close before the writer, so that the writer's close (the last connection) removes the -wal file."""

    def __init__(self, path: Path, store_lock: threading.Lock) -> None:
        self._path = path
        self._store_lock = store_lock
        self._last_commit = 0
        self._due = False
        self._running = threading.Lock()  # held while a checkpoint runs, and by `close`
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        self.finishing = False
        """A checkpoint waits for the store's lock to finish: appends should queue for it, not race it."""

    def committed(self, commit: int) -> bool:
        """Note the writer's commit number `commit`; whether a checkpoint is now due, which the caller then
        runs with `run_soon` (on the event loop) or `run`, once it has let go of the store's lock."""
        if self._due or commit - self._last_commit < CHECKPOINT_EVERY:
            return False
        self._last_commit = commit
        self._due = True
        return True

    def run_soon(self) -> None:
        """Run the due checkpoint in a worker thread (call on the event loop)."""
        asyncio.get_running_loop().run_in_executor(None, self.run)

    def run(self) -> None:
        """Run the due checkpoint here and now (blocking)."""
        with self._running:
            self._due = False
            if self._closed:
                return
            try:
                if self._connection is None:
                    self._connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                # Appends that landed meanwhile are copied too, with the next ones held off (they wait in
                # worker threads): the -wal file starts over only after a checkpoint that copied everything.
                # Little is left to copy by now, and nothing at all when no append landed.
                self.finishing = True
                try:
                    with self._store_lock:
                        self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    self.finishing = False
            except sqlite3.Error as exc:  # the records are safe in the -wal file; the next checkpoint tries again
                logger.warning("Cannot checkpoint the audit log %s: %s", self._path, exc)

    def close(self) -> None:
        """Wait for a running checkpoint and let go of the file (without holding the store's lock)."""
        with self._running:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None
