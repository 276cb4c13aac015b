"""The SQLite audit file: its tables, the triggers that keep it append-only, and how it is opened.

`audit_log` holds the records; `audit_head` holds one row, the last sequence number and hash, written
in the same transaction as every append, so that deleting the last records shows. Triggers refuse
UPDATE and DELETE of records, inserts that do not follow the last record, and moving the head back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from safedb.audit.chain import GENESIS_HASH
from safedb.errors import DatabaseOpenError

FORMAT_VERSION = 1
"""`PRAGMA user_version` of an audit file."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS audit_log (
        seq INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        decision TEXT NOT NULL,
        request_id TEXT NOT NULL,
        target TEXT NOT NULL,
        caller TEXT,
        sql TEXT NOT NULL,
        classification TEXT NOT NULL,
        changes TEXT NOT NULL,
        justification TEXT,
        environment TEXT,
        rows_affected INTEGER,
        error TEXT,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS audit_log_by_time ON audit_log (time)",
    "CREATE INDEX IF NOT EXISTS audit_log_by_target ON audit_log (target, seq)",
    "CREATE INDEX IF NOT EXISTS audit_log_by_request ON audit_log (request_id)",
    """CREATE TABLE IF NOT EXISTS audit_head (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL,
        hash TEXT NOT NULL
    )""",
    f"INSERT OR IGNORE INTO audit_head (id, seq, hash) VALUES (1, 0, '{GENESIS_HASH}')",
    """CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: records cannot be changed'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: records cannot be deleted'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS audit_log_append_at_end BEFORE INSERT ON audit_log
    WHEN NEW.seq <= (SELECT COALESCE(MAX(seq), 0) FROM audit_log)
      OR NEW.prev_hash IS NOT COALESCE((SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1), '{GENESIS_HASH}')
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: a record must follow the last one'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_head_forward_only BEFORE UPDATE ON audit_head
    WHEN NEW.seq <= OLD.seq OR NEW.id IS NOT OLD.id
    BEGIN SELECT RAISE(ABORT, 'the audit head only moves forward'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_head_no_delete BEFORE DELETE ON audit_head
    BEGIN SELECT RAISE(ABORT, 'the audit head cannot be deleted'); END""",
    f"PRAGMA user_version = {FORMAT_VERSION}",
)


def open_writer(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """The appending connection (created with its schema if the file is new), in WAL mode.

    Autocommit mode: the store runs its own `BEGIN IMMEDIATE` transactions. Usable from any thread
    (the store serialises its use with a lock).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            # The log names tables and holds SQL text: readable by its owner only. SQLite gives its
            # -wal and -shm files the same permissions.
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise DatabaseOpenError(f"Cannot create the audit log {path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise DatabaseOpenError(_is_a_directory(path))
    try:
        connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise DatabaseOpenError(f"Cannot open the audit log {path}: {exc}") from None
    try:
        _use_wal(connection, busy_timeout)
        # Commits reach the -wal file at once and the disk when the store's `WalSync` syncs that file,
        # before the append returns: as durable as FULL, without the event loop waiting for the disk.
        connection.execute("PRAGMA synchronous = NORMAL")
        # Appends touch only the last pages of the log's B-trees: a small page cache is enough, and
        # keeps the server's memory flat as the log grows.
        connection.execute("PRAGMA cache_size = -256")
        _create_schema(connection, path)
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise DatabaseOpenError(_open_failure(path, exc)) from None
    except BaseException:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL mode, retrying for up to `busy_timeout` seconds while another connection holds it.

    SQLite answers this pragma's lock conflicts with "database is locked" at once, without its busy
    handler: servers that create one audit log at the same moment would otherwise fail to start.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def open_reader(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A read-only connection to an existing audit file (checked to be one)."""
    if path.is_dir():
        raise DatabaseOpenError(_is_a_directory(path))
    if not path.is_file():
        raise DatabaseOpenError(f"Audit log not found: {path}")
    try:
        connection = sqlite3.connect(
            path.resolve().as_uri() + "?mode=ro", uri=True, timeout=busy_timeout, isolation_level=None
        )
    except sqlite3.DatabaseError as exc:  # a file this user may not read, say
        raise DatabaseOpenError(_open_failure(path, exc)) from None
    try:
        _check_schema(connection, path)
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise DatabaseOpenError(_open_failure(path, exc)) from None
    except BaseException:
        connection.close()
        raise
    return connection


def _create_schema(connection: sqlite3.Connection, path: Path) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        tables = _tables(connection)
        if tables and "audit_log" not in tables:
            raise DatabaseOpenError(f"{path} is an SQLite database but not a SafeDB audit log; refusing to use it.")
        if "audit_log" in tables:
            _check_version(connection, path)
            if "audit_head" not in tables:
                raise DatabaseOpenError(
                    f"The audit log {path} has lost its head anchor table (it was tampered with); "
                    "run `safedb audit verify`. Nothing will be appended to it."
                )
        for statement in _SCHEMA:
            connection.execute(statement)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _check_schema(connection: sqlite3.Connection, path: Path) -> None:
    if "audit_log" not in _tables(connection):
        raise DatabaseOpenError(f"{path} is not a SafeDB audit log (it has no audit_log table).")
    _check_version(connection, path)


def _check_version(connection: sqlite3.Connection, path: Path) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > FORMAT_VERSION:
        raise DatabaseOpenError(f"{path} was written by a newer SafeDB (audit format {version}).")


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _is_a_directory(path: Path) -> str:
    return f"The audit log {path} is a directory: give the path of a file in it (such as {path / 'audit.db'})."


def _open_failure(path: Path, exc: sqlite3.DatabaseError) -> str:
    if "not a database" in str(exc):
        return f"{path} is not a SafeDB audit log (not an SQLite database)."
    return f"Cannot open the audit log {path}: {exc}"
