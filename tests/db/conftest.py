"""Fixtures for the SQLite backend's tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


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
