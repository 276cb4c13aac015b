"""Red team: a generated column defined over another, each over the one before (`c1 AS (c0 + c0)`, `c2 AS (c1 +
c1)`...), which SQLite writes out in full wherever it is read: a 25-character read of the twentieth compiles to
about 3,000,000 instructions. Refused as too long, it stayed compiled all the same, kept by the connection that
classifies statements on the event loop's thread: four or five such reads (told apart by a comment) held SQLite's
whole memory, and every later statement failed for want of it, until the server restarted."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.connections import KEPT_PROGRAM_INSTRUCTIONS

pytestmark = pytest.mark.anyio

_COLUMNS = ", ".join(f"c{level} AS (c{level - 1} + c{level - 1})" for level in range(1, 21))
# About 300 MB of SQLite's memory (its limit is 512 MiB): 30 values of 10 MB, materialized together.
_LARGE_READ = (
    "WITH m AS MATERIALIZED (SELECT randomblob(10000000) AS b FROM generate_series) SELECT count(*), sum(length(b)) "
    "FROM m"
).replace("generate_series", "(" + " UNION ALL ".join("SELECT 1" for _ in range(30)) + ")")


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    """A database with one table of generated columns, each over the one before."""
    path = tmp_path / "generated.db"
    connection = sqlite3.connect(path)
    connection.execute(f"CREATE TABLE g (c0 INTEGER, {_COLUMNS})")
    connection.execute("INSERT INTO g (c0) VALUES (1)")
    connection.commit()
    connection.close()
    return path


@pytest.fixture
async def database(generated: Path) -> AsyncIterator[SqliteDatabase]:
    served = SqliteDatabase(generated, QueryLimits())
    try:
        yield served
    finally:
        await served.aclose()


# Run in a process of its own: SQLite's memory limit is the process's, which other tests' connections share.
_REFUSED_THEN_LARGE_READ = """
import asyncio, sys
from pathlib import Path
from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import InvalidStatement

async def main() -> None:
    database = SqliteDatabase(Path(sys.argv[1]), QueryLimits())
    try:
        for attempt in range(5):
            try:
                await database.classify(f"SELECT c20 FROM g -- {attempt}")
            except InvalidStatement as exc:
                print(str(exc).split(":")[0])
        print((await database.read(await database.classify(sys.argv[2]))).rows)
    finally:
        await database.aclose()

asyncio.run(main())
"""


def test_statements_refused_as_too_long_do_not_keep_the_memory(generated: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _REFUSED_THEN_LARGE_READ, str(generated), _LARGE_READ],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["SQLite cannot run this statement"] * 5 + ["((30, 300000000),)"], ran.stdout


async def test_a_long_program_runs_in_worker_threads_and_is_read(database: SqliteDatabase) -> None:
    """`c15` compiles to about 100,000 instructions: past what the event loop's connections keep compiled, within
    what SafeDB runs."""
    classification = await database.classify("SELECT c15 FROM g")

    result = await database.read(classification)

    assert classification.program_length > KEPT_PROGRAM_INSTRUCTIONS
    assert result.rows == ((2**15,),)
