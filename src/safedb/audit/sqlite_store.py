"""`SqliteAuditStore`: the audit log in its own SQLite file, safe for several processes appending at once.

Each append takes SQLite's write lock first (`BEGIN IMMEDIATE`), then reads the last record's hash,
inserts the new record and moves the head anchor, and commits: appends from any number of processes
queue on that lock, so sequence numbers rise by one with no gaps and every record chains from the one
before it. The file is separate from the served database, so a rolled-back data change keeps its record.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from safedb.audit.chain import GENESIS_HASH
from safedb.audit.errors import AuditUnreadable, AuditWriteFailed
from safedb.audit.events import AuditEvent
from safedb.audit.records import AuditRecord, format_time
from safedb.audit.rows import (
    COLUMNS,
    SELECT_COLUMNS,
    entry_from_row,
    hash_text,
    query_filters,
    record_from_row,
    stored_values,
)
from safedb.audit.sqlite_schema import open_reader, open_writer
from safedb.audit.store import AnswerCheck, AuditQuery, ChainHead, ChainSnapshot
from safedb.audit.threaded import ThreadedAuditStore
from safedb.audit.wal_sync import WalSync
from safedb.errors import DatabaseOpenError
from safedb.inline_work import RecentDuration
from safedb.settings import default_data_dir

logger = logging.getLogger(__name__)

_INSERT = f"INSERT INTO audit_log ({SELECT_COLUMNS}) VALUES ({', '.join('?' for _ in COLUMNS)})"
_MOVE_HEAD = (
    "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash"
)


# Whether the request has an answer already, and whether the log holds its question.
_ANSWER_STATE = (
    "SELECT ifnull(max(decision != 'requested'), 0), ifnull(max(decision = 'requested' AND target = ? AND sql = ?), 0) "
    "FROM audit_log WHERE request_id = ?"
)

AUDIT_FILE_NAME = "audit.db"


def default_audit_path(data_dir: Path | None = None) -> Path:
    """Where the audit log lives unless configured: `audit.db` in the data directory."""
    return (data_dir or default_data_dir()) / AUDIT_FILE_NAME


class SqliteAuditStore(ThreadedAuditStore[sqlite3.Connection]):
    """The audit log in an SQLite file. Open with `SqliteAuditStore.open(path)`; close when done."""

    def __init__(self, path: Path, writer: sqlite3.Connection | None, busy_timeout: float) -> None:
        super().__init__(writer)
        self.path = path
        self._busy_timeout = busy_timeout
        self._recent_appends = RecentDuration()
        self._wal_sync: WalSync | None = None
        self._files: dict[str, tuple[int, int]] = {}
        if writer is not None:
            main_file, wal_file = _writer_files(writer)
            self._wal_sync = WalSync(wal_file)
            self._files = _identities((main_file, wal_file))  # after WalSync opened the -wal file

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False, busy_timeout: float = 30.0) -> SqliteAuditStore:
        """Open the audit file at `path`, creating it unless `readonly`.

        Raises DatabaseOpenError when the file is missing (readonly), is not an SQLite database, or is a
        database that is not an audit log.
        """
        if readonly:
            open_reader(path, busy_timeout).close()
            return cls(path, None, busy_timeout)
        writer = open_writer(path, busy_timeout)
        try:
            writer.execute("PRAGMA busy_timeout = 0")  # see `_begin`
            return cls(path, writer, busy_timeout)
        except OSError as exc:
            writer.close()
            raise DatabaseOpenError(f"Cannot open the audit log's write-ahead log next to {path}: {exc}") from None
        except BaseException:
            writer.close()
            raise

    @property
    def label(self) -> str:
        return str(self.path.resolve())

    def close(self) -> None:
        super().close()
        if self._wal_sync is not None:
            self._wal_sync.close()

    async def _append_soon(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        """Append on the event loop's thread when appends have lately been quick (`RecentDuration`) and the
        write lock is free, in this process and in the file; otherwise wait for it in a worker thread.

        An answer is synced to the disk before this returns, by the sync thread while the event loop goes on;
        other records within a moment (`WalSync`).
        """
        if self._recent_appends.within_budget() and self._lock.acquire(blocking=False):
            try:
                writer = self._open_writer()
                begun = self._begin(writer, wait=False)
                if begun:
                    with self._recent_appends.timing():
                        record, commit = self._append_begun(writer, event, check)
            finally:
                self._lock.release()
            if begun:
                if check is not None:
                    with self._failures():
                        await self._synced_wal().synced_through(commit)
                else:
                    self._synced_wal().sync_soon()
                return record
        return await super()._append_soon(event, check)

    def _write(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        """`append` under the store lock (see `ThreadedAuditStore.append`), synced to the disk."""
        with self._lock:
            writer = self._open_writer()
            self._begin(writer, wait=True)
            record, commit = self._append_begun(writer, event, check)
        self._sync_through(commit)
        return record

    def _sync_through(self, commit: int) -> None:
        with self._failures():
            self._synced_wal().sync_through(commit)

    def _open_writer(self) -> sqlite3.Connection:
        if self._writer is None:
            raise AuditWriteFailed(f"The audit log {self.path} is not open for writing.")
        return self._writer

    def _synced_wal(self) -> WalSync:
        assert self._wal_sync is not None  # there is one whenever there is a writer
        return self._wal_sync

    def _begin(self, writer: sqlite3.Connection, *, wait: bool) -> bool:
        """Take the file's write lock (`BEGIN IMMEDIATE`). With `wait`, for up to the busy timeout; without,
        False when another connection holds it. The writer waits only here: its own busy timeout is 0, so
        that the common case (no wait, on the event loop) costs one statement."""
        with self._failures():
            if wait:
                writer.execute(f"PRAGMA busy_timeout = {round(self._busy_timeout * 1000)}")
                try:
                    writer.execute("BEGIN IMMEDIATE")
                finally:
                    writer.execute("PRAGMA busy_timeout = 0")
                return True
            try:
                writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                    raise
                return False
            return True

    @contextmanager
    def _failures(self) -> Iterator[None]:
        # MemoryError: SQLite's memory limit (`PRAGMA hard_heap_limit`) is the process's, which the served
        # database's statements may fill; the store then reports it as any other failure to write.
        try:
            yield
        except (sqlite3.Error, OSError, MemoryError) as exc:
            reason = str(exc) or "out of memory"  # Python's sqlite3 raises MemoryError with no text
            logger.error("Cannot append to the audit log %s: %s", self.path, reason)
            raise AuditWriteFailed(f"The audit log could not be written ({reason}).") from exc

    def _append_begun(
        self, writer: sqlite3.Connection, event: AuditEvent, check: AnswerCheck | None
    ) -> tuple[AuditRecord | None, int]:
        """Append within the transaction `_begin` started, and commit (or roll back on any failure). The
        record (None if refused, see `append`) and the commit to sync through (0 when nothing was written).
        """
        with self._failures():
            try:
                record = self._append(writer, event, check)
            except BaseException:
                if writer.in_transaction:
                    writer.execute("ROLLBACK")
                raise
        return record, 0 if record is None else self._synced_wal().committed()

    def _append(self, writer: sqlite3.Connection, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        self._check_in_place()
        if check is not None:
            answered, asked = writer.execute(_ANSWER_STATE, (event.target, event.sql, event.request_id)).fetchone()
            if not check.passes(bool(answered), bool(asked)):
                writer.execute("ROLLBACK")
                return None
        last = writer.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
        head = writer.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
        last_seq, last_hash = last if last is not None else (0, GENESIS_HASH)
        head_seq = head[0] if head is not None else 0
        if head is None or (head[0], head[1]) != (last_seq, last_hash):
            logger.warning(
                "The audit log %s does not end where its head anchor says (records were removed or added "
                "outside SafeDB); appending after it. Run `safedb audit verify`.",
                self.path,
            )
        record = AuditRecord.chained(
            event,
            seq=max(last_seq, head_seq) + 1,
            time=format_time(datetime.now(UTC)),
            prev_hash=last_hash,
        )
        writer.execute(_INSERT, stored_values(record))
        writer.execute(_MOVE_HEAD, (record.seq, record.hash))
        writer.execute("COMMIT")
        return record

    def _check_in_place(self) -> None:
        """AuditWriteFailed unless the log's file and its -wal file are still the ones the writer opened.

        In WAL mode SQLite does not notice its files being deleted or renamed over: the writer would go on
        appending to files no one can read any more (and that vanish when it closes), and approved statements
        would run with no record anyone can see.
        """
        for name, identity in self._files.items():
            try:
                stat = os.stat(name)
                in_place = (stat.st_dev, stat.st_ino) == identity
            except OSError:
                in_place = False
            if not in_place:
                raise AuditWriteFailed(
                    f"The audit log {self.path} was deleted or replaced while this server had it open, so nothing "
                    "more is written to it. Restart the server, and run `safedb audit verify`."
                )

    def records(self, query: AuditQuery) -> Iterator[AuditRecord]:
        """The records matching `query`, oldest first, read through a connection of their own."""
        where, parameters = query_filters(query, "?")
        sql = f"SELECT {SELECT_COLUMNS} FROM audit_log {where} ORDER BY seq"
        if query.limit is not None:
            sql = f"SELECT * FROM ({sql} DESC LIMIT ?) ORDER BY seq"
            parameters.append(query.limit)
        with self._reader() as reader:
            for row in reader.execute(sql, parameters):
                yield record_from_row(row)

    @contextmanager
    def snapshot(self) -> Iterator[ChainSnapshot]:
        """The head anchor and all records, read in one transaction (appends meanwhile are not seen)."""
        with self._reader() as reader:
            reader.execute("BEGIN")
            try:
                head = _head(reader)
                rows = reader.execute(f"SELECT {SELECT_COLUMNS} FROM audit_log ORDER BY seq")
                yield ChainSnapshot(
                    head=head,
                    entries=(entry_from_row(row) for row in rows),
                )
            finally:
                reader.execute("ROLLBACK")

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own for reading; AuditUnreadable when SQLite cannot read on (a page found damaged:
        opening the file reads its first page only; a lock held past the busy timeout)."""
        connection = open_reader(self.path, self._busy_timeout)
        try:
            yield connection
        except sqlite3.Error as exc:
            raise AuditUnreadable(f"The audit log {self.path} cannot be read: {exc}.") from None
        finally:
            connection.close()


def _writer_files(writer: sqlite3.Connection) -> tuple[str, str]:
    """The writer's main file and its -wal file, named as SQLite names it: after the main file's full path. Read
    as bytes, since a path need not be UTF-8 text (SQLite keeps the bytes it was given)."""
    (name,) = writer.execute("SELECT CAST(file AS BLOB) FROM pragma_database_list WHERE name = 'main'").fetchone()
    main_file = os.fsdecode(name)
    return main_file, f"{main_file}-wal"


def _identities(names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """The device and inode of each file named (the writer's, just opened)."""
    return {name: (stat.st_dev, stat.st_ino) for name in names for stat in [os.stat(name)]}


def _head(reader: sqlite3.Connection) -> ChainHead | None:
    """The head anchor; None when it is gone (its table dropped or its row deleted) or is not a number."""
    try:
        row = reader.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or not isinstance(row[0], int):
        return None
    return ChainHead(seq=row[0], hash=hash_text(row[1]))
