"""Fixtures for the SQLite backend's tests."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase


@pytest.fixture
def database_file(tmp_path: Path) -> Path:
    """A database file with one table, `items` (id, name), of two rows."""
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO items (name) VALUES ('a'), ('b')")
    connection.commit()
    connection.close()
    return path


@asynccontextmanager
async def served_script(path: Path, script: str) -> AsyncIterator[SqliteDatabase]:
    """A database file made at `path` by `script`, served by SafeDB's SQLite backend (default limits) in the block."""
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.close()
    served = SqliteDatabase(path, QueryLimits())
    try:
        yield served
    finally:
        await served.aclose()
