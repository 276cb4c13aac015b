"""The benchmark database: SafeDB's demo tables plus a scratch table and a few large tables."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from safedb.db.demo import ensure_demo_database

SCRATCH_TABLE = "bench_scratch"

SMALL_READ = "SELECT id, name, email FROM users WHERE id = 3"
"""The read-path query: one row by primary key."""

DESTRUCTIVE = f"DELETE FROM {SCRATCH_TABLE} WHERE id = -1"
"""The statement both servers ask about (a DELETE); it matches no row, so it can run any number of times."""


def rows_table(rows: int) -> str:
    return f"bench_rows_{rows}"


def large_query(rows: int, shape: str) -> str:
    """`scan`: every column of every row, in storage order (the row cap stops reading early); `sorted`: the
    same ordered by an unindexed column, so the engine must read and sort all rows before the first."""
    table = rows_table(rows)
    if shape == "scan":
        return f"SELECT * FROM {table}"
    return f"SELECT * FROM {table} ORDER BY amount DESC, id"


def build(directory: Path, large_tables: Iterable[int]) -> Path:
    """A fresh database in `directory` (created): demo tables, the scratch table, one table per size."""
    path = ensure_demo_database(directory)
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"CREATE TABLE {SCRATCH_TABLE} (id INTEGER PRIMARY KEY, label TEXT)")
        connection.executemany(f"INSERT INTO {SCRATCH_TABLE} VALUES (?, ?)", [(i, f"row {i}") for i in range(1, 11)])
        for rows in sorted(set(large_tables)):
            table = rows_table(rows)
            connection.execute(
                f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, label TEXT NOT NULL, amount INTEGER NOT NULL, "
                "note TEXT NOT NULL)"
            )
            connection.execute(
                f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                f"INSERT INTO {table} SELECT i, 'row ' || i, (i * 7919) % 100003, printf('note %040d', i) FROM n",
                (rows,),
            )
        connection.commit()
    finally:
        connection.close()
    return path
