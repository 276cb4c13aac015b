"""What SQLite's connections keep compiled: found by red-teaming. Python's sqlite3 keeps the last 128 statements
each connection prepared, compiled in SQLite's memory, which counts against `MAX_SQLITE_HEAP_BYTES`. Seventy reads
of 90,000 characters, or five of 900,000, filled it (and the server's memory grew to 900 MiB, for good): every
later statement but the shortest failed for want of memory, until the server restarted.

Real SQLite connections; what each keeps prepared is read from SQLite's own list (`sqlite_stmt`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.connections import GuardedConnection
from safedb.inline_work import INLINE_STATEMENT_CHARS, LONG_STATEMENT_CHARS

pytestmark = pytest.mark.anyio


def repeated(value: int, count: int) -> str:
    return ", ".join(str(value) for _ in range(count))


SHORT_READ = "SELECT name FROM items WHERE id = 1"
MEDIUM_READ = f"SELECT 1 IN ({repeated(1, INLINE_STATEMENT_CHARS)})"
LONG_READ = f"SELECT 7 IN ({repeated(1, LONG_STATEMENT_CHARS // 3 + 10)})"
MEDIUM_DELETE = f"DELETE FROM items WHERE id IN ({repeated(-1, INLINE_STATEMENT_CHARS)})"
LONG_DELETE = f"DELETE FROM items WHERE id IN ({repeated(-1, LONG_STATEMENT_CHARS // 4 + 10)})"


def connections_of(database: SqliteDatabase) -> list[GuardedConnection]:
    """Every connection the database holds, in pools or on their own."""
    found: list[GuardedConnection] = []
    for value in vars(database).values():
        members = value if isinstance(value, list) else [value]
        found += [member for member in members if isinstance(member, GuardedConnection)]
    return list({id(connection): connection for connection in found}.values())


def kept_statements(database: SqliteDatabase) -> list[str]:
    """Every statement that some connection of the database keeps prepared."""
    kept = []
    for guarded in connections_of(database):
        kept += [sql for (sql,) in guarded.connection.execute("SELECT sql FROM sqlite_stmt")]
    return kept


async def test_only_short_statements_are_kept_compiled(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        reads = [await database.read(await database.classify(sql)) for sql in (SHORT_READ, MEDIUM_READ, LONG_READ)]
        outcomes = []
        for sql in (MEDIUM_DELETE, LONG_DELETE):
            delete = await database.classify(sql)
            preview = await database.preview(delete)
            outcomes.append(await database.write(delete, preview.bounds))
        kept = kept_statements(database)
    finally:
        await database.aclose()
    assert [read.rows for read in reads] == [(("a",),), ((1,),), ((0,),)]
    assert [outcome.rows_affected for outcome in outcomes] == [0, 0]
    assert len(connections_of(database)) >= 10
    assert any(sql.startswith(SHORT_READ) for sql in kept)  # to be run again without compiling
    assert not [sql[:40] for sql in kept if "IN (" in sql and len(sql) > INLINE_STATEMENT_CHARS]
