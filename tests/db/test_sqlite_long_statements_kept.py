"""The longest statements leave nothing prepared behind: found by red-teaming. Python's sqlite3 keeps the last 128
statements each connection prepared, compiled in SQLite's memory. Five reads of 900,000 characters held SQLite's
whole heap (`MAX_SQLITE_HEAP_BYTES`) and the server's memory grew to 900 MiB, for good: every later long statement
failed for want of memory until the server restarted.

Real SQLite connections; what each has prepared is read from SQLite's own list (`sqlite_stmt`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.connections import GuardedConnection
from safedb.inline_work import LONG_STATEMENT_CHARS

pytestmark = pytest.mark.anyio

LONG_READ = "SELECT 7 IN (" + ", ".join("1" for _ in range(LONG_STATEMENT_CHARS // 3 + 10)) + ")"
LONG_DELETE = "DELETE FROM items WHERE id IN (" + ", ".join("-1" for _ in range(LONG_STATEMENT_CHARS // 4 + 10)) + ")"
SHORT_READ = "SELECT name FROM items WHERE id = 1"


def connections_of(database: SqliteDatabase) -> list[GuardedConnection]:
    """Every connection the database holds, in pools or on their own."""
    found: list[GuardedConnection] = []
    for value in vars(database).values():
        members = value if isinstance(value, list) else [value]
        found += [member for member in members if isinstance(member, GuardedConnection)]
    return list({id(connection): connection for connection in found}.values())


def prepared_lengths(database: SqliteDatabase) -> list[int]:
    """The length of every statement that some connection of the database keeps prepared."""
    lengths = []
    for guarded in connections_of(database):
        lengths += [length for (length,) in guarded.connection.execute("SELECT length(sql) FROM sqlite_stmt")]
    return lengths


async def test_the_longest_statements_are_not_kept_prepared(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        short = await database.read(await database.classify(SHORT_READ))
        long = await database.read(await database.classify(LONG_READ))
        delete = await database.classify(LONG_DELETE)
        preview = await database.preview(delete)
        outcome = await database.write(delete, preview.rows_affected)
        lengths = prepared_lengths(database)
    finally:
        await database.aclose()
    assert short.rows == (("a",),)
    assert long.rows == ((0,),)
    assert outcome.rows_affected == 0
    assert len(connections_of(database)) >= 10
    assert len(SHORT_READ) in lengths  # short statements stay prepared, to be run again without compiling
    assert max(lengths) <= LONG_STATEMENT_CHARS
