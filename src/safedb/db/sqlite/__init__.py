"""The SQLite backend."""

from safedb.db.sqlite.backend import SqliteDatabase

__all__ = ["SqliteDatabase"]
