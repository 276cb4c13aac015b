"""Red team, tenth pass on SQLite:

- a declined INSERT left its rowid in `last_insert_rowid()` of the shared writer (its dry run was rolled back, the
  function's value was not): a later `DELETE ... WHERE id = last_insert_rowid()` was asked about, and deleted, the
  row of that id. The functions that report what the connection ran last are now refused in a change;
- a read of under 1,000 characters calling only "bounded" functions ran on the event loop, where `json_extract`
  with a hundred paths over an 800 KB document took 36 ms a call: the loop was held for 3.6 s before the time limit
  was looked at. `json_extract`, which takes any number of paths, is no longer counted as bounded;
- `VACUUM INTO ''` was described as `VACUUM INTO '?'`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import DeniedByPolicy
from tests.db.conftest import served_script
from tests.helpers import rows, watching_the_loop

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT);
INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob'), (3, 'carol'), (4, 'dave');
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
CREATE TABLE log (n INTEGER);
CREATE TRIGGER notes_logged AFTER DELETE ON notes BEGIN INSERT INTO log VALUES (last_insert_rowid()); END;
"""


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "state.db"
    async with served_script(path, SCHEMA) as served:
        yield served, path


async def test_a_declined_insert_leaves_nothing_a_later_change_can_use(database: tuple[SqliteDatabase, Path]) -> None:
    served, path = database
    declined = await served.classify("INSERT INTO notes (id, body) VALUES (4, 'x')")
    await served.preview(declined)  # the question's dry run; then the person declines

    with pytest.raises(DeniedByPolicy, match=r"last_insert_rowid\(\) reports what SafeDB's connection"):
        await served.classify("DELETE FROM accounts WHERE id = last_insert_rowid()")

    assert rows(path, "SELECT count(*) FROM accounts") == [(4,)]
    assert rows(path, "SELECT count(*) FROM notes") == [(0,)]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO log VALUES (changes())",
        "UPDATE accounts SET name = total_changes() WHERE id = 1",
        "DELETE FROM notes WHERE id = 1",  # its trigger calls last_insert_rowid()
    ],
)
async def test_a_change_using_what_the_connection_ran_last_is_refused(
    database: tuple[SqliteDatabase, Path], sql: str
) -> None:
    served, _ = database
    with pytest.raises(DeniedByPolicy, match="Nothing was run"):
        await served.classify(sql)


async def test_a_read_may_still_call_them(database: tuple[SqliteDatabase, Path]) -> None:
    served, _ = database
    result = await served.read(await served.classify("SELECT last_insert_rowid(), changes(), total_changes()"))

    assert result.rows == ((0, 0, 0),)


async def test_a_read_of_many_json_paths_does_not_hold_up_the_event_loop(
    database: tuple[SqliteDatabase, Path],
) -> None:
    served, _ = database
    paths = ",".join(["'$.q'"] * 100)
    ones = ",".join("1" * 100)
    # A document of 32,768 keys, each path looked up in it by each of 100 calls.
    sql = (
        "WITH RECURSIVE r(s, n) AS (SELECT '\"k\":1,', 0 UNION ALL SELECT s || s, n + 1 FROM r WHERE n < 15) "
        f"SELECT count(json_extract('{{' || s || '\"z\":0}}', {paths})) FROM r, json_each('[{ones}]') WHERE n = 15"
    )
    assert len(sql) < 1000
    classification = await served.classify(sql)

    result, longest = await watching_the_loop(lambda: served.read(classification))

    assert result.rows == ((100,),)
    assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"


async def test_vacuum_into_an_empty_name_is_described_as_it_reads(database: tuple[SqliteDatabase, Path]) -> None:
    served, _ = database
    classification = await served.classify("VACUUM INTO ''")

    assert [change.target.name for change in classification.changes] == [""]
