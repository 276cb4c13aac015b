"""The embedded demo database: `users` and `invoices`, created and seeded on first use."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from pathlib import Path

from safedb.errors import DatabaseOpenError

DEMO_FILE_NAME = "demo.db"

_SCHEMA_AND_ROWS = """
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL DEFAULT 'member',
    created_at TEXT NOT NULL
);
CREATE TABLE invoices (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    status TEXT NOT NULL CHECK (status IN ('draft', 'sent', 'paid', 'void')),
    issued_at TEXT NOT NULL
);
INSERT INTO users (id, name, email, role, created_at) VALUES
    (1, 'Ada Lovelace', 'ada@example.com', 'admin', '2025-01-14'),
    (2, 'Grace Hopper', 'grace@example.com', 'member', '2025-02-03'),
    (3, 'Alan Turing', 'alan@example.com', 'member', '2025-03-21'),
    (4, 'Katherine Johnson', 'katherine@example.com', 'member', '2025-04-08'),
    (5, 'Edsger Dijkstra', 'edsger@example.com', 'member', '2025-05-30');
INSERT INTO invoices (id, user_id, amount_cents, status, issued_at) VALUES
    (1, 1, 12000, 'paid', '2025-06-01'),
    (2, 2, 4550, 'paid', '2025-06-03'),
    (3, 2, 9900, 'sent', '2025-07-11'),
    (4, 3, 250000, 'draft', '2025-07-19'),
    (5, 4, 1875, 'paid', '2025-08-02'),
    (6, 5, 64000, 'sent', '2025-08-15'),
    (7, 1, 3300, 'void', '2025-09-01'),
    (8, 3, 15000, 'paid', '2025-09-09');
"""


def ensure_demo_database(data_dir: Path) -> Path:
    """The demo database in `data_dir`, created and seeded if it is not there yet.

    It is built in a temporary file and linked into place, so an interrupted first run never leaves a
    half-built database behind.
    """
    path = data_dir / DEMO_FILE_NAME
    if path.exists():
        return path
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".demo-", suffix=".db", dir=data_dir)
    except OSError as exc:
        raise DatabaseOpenError(f"Cannot create the demo database in {data_dir}: {exc.strerror or exc}") from None
    os.close(handle)
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.executescript(_SCHEMA_AND_ROWS)
            connection.commit()
        finally:
            connection.close()
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)  # never replaces: a concurrent first run keeps its own copy
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path
