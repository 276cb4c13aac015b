"""Red team: an approval held for table names, not for the tables. Two tables swapping names while a person decided
(`ALTER TABLE ... RENAME`) had the approved DELETE of one row delete a row of the other table (the dry run's count
still held), and the approved DROP drop the other table, whose rows the question had not counted. Now the question
binds each table and index to its root page, which stays with it when it is renamed.

Every virtual table's root page is 0, so two FTS5 tables swapping names still had an approved DELETE or DROP of one
change the other; one is now bound to its catalog row and its module's tables' root pages."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import ChangedSinceQuestion
from tests.db.conftest import served_script
from tests.helpers import rows

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE small (id INTEGER);
INSERT INTO small VALUES (1);
CREATE TABLE big (id INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO big SELECT i FROM n;
CREATE INDEX small_id ON small (id);
CREATE INDEX big_id ON big (id);
CREATE VIRTUAL TABLE public_notes USING fts5(body);
INSERT INTO public_notes (rowid, body) VALUES (1, 'draft');
CREATE VIRTUAL TABLE secret_notes USING fts5(body);
INSERT INTO secret_notes (rowid, body) VALUES (1, 'contract'), (2, 'payroll');
"""

NOTES_SWAPPED = (
    "ALTER TABLE public_notes RENAME TO tmp_notes; ALTER TABLE secret_notes RENAME TO public_notes; "
    "ALTER TABLE tmp_notes RENAME TO secret_notes;"
)

SWAPPED = {
    "tables": "ALTER TABLE small RENAME TO small_old; ALTER TABLE big RENAME TO small;",
    # Made again on other pages: one made on the very pages freed is the same table to SQLite (docs/safety.md).
    "dropped-and-made-again": (
        "DROP TABLE small; CREATE TABLE filler (id INTEGER); CREATE TABLE small (id INTEGER); "
        "INSERT INTO small VALUES (1);"
    ),
}


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "swap.db"
    async with served_script(path, SCHEMA) as served:
        yield served, path


def _meanwhile(path: Path, script: str) -> dict[str, int]:
    """Run `script` as another connection would while a person decides; the row count of each table then."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(script)
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
        return {name: connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in tables}
    finally:
        connection.close()


@pytest.mark.parametrize("case", list(SWAPPED))
@pytest.mark.parametrize(
    "sql", ["DELETE FROM small WHERE id = 1", "UPDATE small SET id = 2 WHERE id = 1", "DROP TABLE small"]
)
async def test_a_table_that_took_the_name_while_asking_is_left_alone(
    database: tuple[SqliteDatabase, Path], sql: str, case: str
) -> None:
    served, path = database
    approved = await served.classify(sql)
    impact = await served.preview(approved)
    counts = _meanwhile(path, SWAPPED[case])

    with pytest.raises(ChangedSinceQuestion, match="small now means"):
        await served.write(approved, impact.bounds)

    assert _meanwhile(path, "") == counts
    assert rows(path, "SELECT count(*) FROM small WHERE id = 1") == [(1,)]


@pytest.mark.parametrize("sql", ["DELETE FROM public_notes WHERE rowid = 1", "DROP TABLE public_notes"])
async def test_a_virtual_table_that_took_the_name_while_asking_is_left_alone(
    database: tuple[SqliteDatabase, Path], sql: str
) -> None:
    served, path = database
    approved = await served.classify(sql)
    impact = await served.preview(approved)
    _meanwhile(path, NOTES_SWAPPED)

    with pytest.raises(ChangedSinceQuestion, match="public_notes now means"):
        await served.write(approved, impact.bounds)

    assert rows(path, "SELECT body FROM public_notes ORDER BY rowid") == [("contract",), ("payroll",)]
    assert rows(path, "SELECT body FROM secret_notes") == [("draft",)]


async def test_an_index_that_took_the_name_while_asking_is_not_dropped(database: tuple[SqliteDatabase, Path]) -> None:
    served, path = database
    approved = await served.classify("DROP INDEX small_id")
    _meanwhile(path, "DROP INDEX small_id; CREATE TABLE filler (id INTEGER); CREATE INDEX small_id ON big (id);")

    with pytest.raises(ChangedSinceQuestion, match="small_id now means"):
        await served.write(approved)

    assert rows(path, "SELECT tbl_name FROM sqlite_schema WHERE name = 'small_id'") == [("big",)]


async def test_tables_left_as_they_were_are_changed(database: tuple[SqliteDatabase, Path]) -> None:
    served, path = database
    _meanwhile(path, "CREATE TABLE unrelated (id INTEGER);")  # another schema change: the names still mean the same
    for sql in ("DELETE FROM small WHERE id = 1", "DROP TABLE big", "DELETE FROM public_notes WHERE rowid = 1"):
        approved = await served.classify(sql)
        impact = await served.preview(approved)
        await served.write(approved, impact.bounds)

    assert rows(path, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE '%notes%' ORDER BY 1") == [
        ("small",),
        ("unrelated",),
    ]
    assert rows(path, "SELECT count(*) FROM small") == [(0,)]
    assert rows(path, "SELECT count(*) FROM public_notes") == [(0,)]
