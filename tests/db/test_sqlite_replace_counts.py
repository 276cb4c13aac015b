"""REPLACE conflict resolution deletes rows that SQLite's change counts leave out: a preview that may miss
them binds no row count and says why; every other data change keeps its count."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryFailed
from tests.db.conftest import served_script
from tests.helpers import rows

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT UNIQUE);
INSERT INTO accounts VALUES (1, 'a@example.com'), (2, 'b@example.com');
CREATE TABLE tags (name TEXT UNIQUE ON CONFLICT REPLACE, note TEXT);
INSERT INTO tags VALUES ('red', 'first'), ('blue', 'first');
CREATE TABLE events (account INTEGER, email TEXT);
CREATE TRIGGER events_sync AFTER INSERT ON events BEGIN
    INSERT OR REPLACE INTO accounts VALUES (NEW.account, NEW.email);
END;
CREATE TABLE plain (id INTEGER PRIMARY KEY, label TEXT);
"""


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "replace.db"
    async with served_script(path, SCHEMA) as served:
        yield served, path


def table(path: Path, name: str) -> list[tuple[object, ...]]:
    return rows(path, f"SELECT * FROM {name} ORDER BY 1")


@pytest.mark.parametrize(
    "sql",
    [
        # Conflicts with row 1 on its key and with row 2 on its email: both go, one row comes.
        "REPLACE INTO accounts VALUES (1, 'b@example.com')",
        "INSERT OR REPLACE INTO accounts VALUES (1, 'b@example.com')",
        "UPDATE OR REPLACE accounts SET email = 'b@example.com' WHERE id = 1",
        # The table's own constraint resolves conflicts by REPLACE.
        "INSERT INTO tags VALUES ('red', 'second')",
        # A trigger on the changed table replaces rows in another one.
        "INSERT INTO events VALUES (1, 'b@example.com')",
    ],
    ids=["replace", "insert or replace", "update or replace", "constraint", "trigger"],
)
async def test_a_change_that_may_replace_rows_binds_no_count_and_says_why(
    database: tuple[SqliteDatabase, Path], sql: str
) -> None:
    served, path = database
    before = {name: table(path, name) for name in ("accounts", "tags", "events")}

    impact = await served.preview(await served.classify(sql))

    assert impact.rows_affected is None
    assert "REPLACE may also delete rows that conflict on a unique key" in " ".join(impact.lines)
    assert {name: table(path, name) for name in before} == before, "the dry run was rolled back"


async def test_what_a_replace_deletes_is_what_the_preview_warned_of(database: tuple[SqliteDatabase, Path]) -> None:
    """The case the warning is for: the approved statement runs unbound, and deletes two rows for one."""
    served, path = database
    classification = await served.classify("REPLACE INTO accounts VALUES (1, 'b@example.com')")
    impact = await served.preview(classification)

    await served.write(classification, impact.bounds)

    assert table(path, "accounts") == [(1, "b@example.com")]


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("INSERT INTO plain VALUES (1, 'x'), (2, 'y')", 2),
        ("UPDATE accounts SET email = 'c@example.com' WHERE id = 2", 1),
        ("DELETE FROM tags WHERE name = 'blue'", 1),
        # The word alone, in a comment, a string, a name or the replace() function, resolves no conflict.
        ("DELETE FROM plain WHERE id = 1 OR label = 'replace' /* replace */", 0),
        ("UPDATE accounts SET email = replace(email, 'a@', 'c@') WHERE id = 1", 1),
        ('UPDATE plain SET label = "replace" WHERE 0 -- replace', 0),
    ],
)
async def test_other_changes_keep_their_count(database: tuple[SqliteDatabase, Path], sql: str, rows: int) -> None:
    served, _ = database
    impact = await served.preview(await served.classify(sql))
    assert impact.rows_affected == rows
    assert "REPLACE" not in " ".join(impact.lines)


async def test_a_table_redefined_to_replace_while_the_person_decides_stops_the_counted_change(
    database: tuple[SqliteDatabase, Path],
) -> None:
    """Another connection gives `accounts.email` ON CONFLICT REPLACE after the question showed 1 row: the
    insert would delete account 1 unseen, and REPLACE deletions reach no authorizer and no count."""
    served, path = database
    classification = await served.classify("INSERT INTO accounts (email) VALUES ('c@example.com')")
    impact = await served.preview(classification)
    assert impact.rows_affected == 1
    with closing(sqlite3.connect(path)) as other, other:
        # The same table (a table made anew under its name is another one, which stops the run before this check):
        # its definition edited in place, as only `writable_schema` can.
        (version,) = other.execute("PRAGMA schema_version").fetchone()
        other.executescript(
            f"""
            DROP TRIGGER events_sync;
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = replace(sql, 'email TEXT UNIQUE', 'email TEXT UNIQUE ON CONFLICT REPLACE')
            WHERE name = 'accounts';
            PRAGMA schema_version = {version + 2};
            PRAGMA writable_schema = OFF;
            UPDATE accounts SET email = 'c@example.com' WHERE id = 1;
            """
        )

    with pytest.raises(QueryFailed, match="may REPLACE conflicting rows"):
        await served.write(classification, impact.bounds)

    assert table(path, "accounts") == [(1, "c@example.com"), (2, "b@example.com")]
