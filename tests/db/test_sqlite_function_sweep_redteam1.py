"""Red team: a sweep of the SQL functions and virtual table modules SQLite offers a read that SafeDB runs unasked.

- `count(*)` of a table (one `Count` step of SQLite's program, which counts the whole B-tree), `PRAGMA
  integrity_check` and `quick_check` (one `IntegrityCk` step over the whole file) and reads of virtual tables (one
  xFilter or xNext call: `dbstat WHERE aggregate = 1` walks a whole B-tree in one) called no function outside the
  short list, so they ran on the event loop, where the progress handler never ran inside that step: on a 670 MB
  database the loop was held 0.1-0.2 s by every `count(*)` and 0.3-0.4 s by every aggregate of dbstat (never moved
  to a worker thread, since the read did not run past its budget at a check), more the larger the file;
- in a worker thread, a row of many calls that each build a large value (`length(randomblob(60000000)) + ...`) has
  no jump between them, where SQLite looks at its interrupt: the call ended at its time limit, but the thread went
  on for the whole row (34 s of CPU for 200 calls in 6 KB of text, minutes for a longer one), holding its reader.
  Once interrupted, a connection now builds no value of more than a few bytes, so the row fails at its next call.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryTimeout
from safedb.sql.sqlite_actions import calls_only_bounded_functions

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO items (name) VALUES ('a'), ('b');
CREATE VIRTUAL TABLE notes USING fts5 (body);
INSERT INTO notes (body) VALUES ('hello world');
"""


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    connection.close()
    return path


@pytest.mark.parametrize(
    ("sql", "one_long_step"),
    [
        ("SELECT count(*) FROM items", True),
        ("PRAGMA integrity_check", True),
        ("SELECT * FROM pragma_quick_check", True),
        ("SELECT * FROM dbstat WHERE aggregate = 1", True),
        ("SELECT * FROM notes WHERE notes MATCH 'hel*'", True),
        ("SELECT * FROM json_each('[1, 2]')", True),
        ("SELECT count(*) FROM items WHERE id > 0", False),
        ("SELECT max(id), length(name) FROM items", False),
    ],
)
async def test_a_whole_b_tree_or_a_modules_work_in_one_step_is_never_run_on_the_event_loop(
    database_path: Path, sql: str, one_long_step: bool
) -> None:
    database = SqliteDatabase(database_path, QueryLimits())
    try:
        classification = await database.classify(sql)
        result = await database.read(classification)
    finally:
        await database.aclose()

    assert classification.read_only
    assert result.rows
    assert calls_only_bounded_functions(classification) is not one_long_step


async def test_a_row_of_large_values_lets_go_of_its_reader_once_interrupted(database_path: Path) -> None:
    # Some 10 s of work without a jump (0.17 s a call), stopped at 0.5 s.
    row = " + ".join(["length(randomblob(60000000))"] * 60)
    database = SqliteDatabase(database_path, QueryLimits(statement_timeout=0.5), readers=1)
    try:
        with pytest.raises(QueryTimeout):
            await database.read(await database.classify(f"SELECT {row}"))
        # hex() keeps it off the event loop: it needs the one reader the row above held.
        later = await database.classify("SELECT hex(name) FROM items ORDER BY id")
        started = time.monotonic()
        while True:
            try:
                result = await database.read(later)
                break
            except QueryTimeout:
                assert time.monotonic() - started < 4, "the reader was still held 4 s after the time limit"
        # The reader builds values as large as before.
        large = await database.read(await database.classify("SELECT length(randomblob(10000000))"))
    finally:
        await database.aclose()

    assert result.rows == (("61",), ("62",))
    assert large.rows == ((10_000_000,),)
