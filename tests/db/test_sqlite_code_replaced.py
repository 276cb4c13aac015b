"""Red team: an approval held for the names of the triggers and views a statement runs, not for their code. A trigger
dropped and made again under the same name while a person decided, with a body that makes the same authorizer events
and changes as many rows, ran its new code in the approved run (it charged another account 1000 times the amount).
Now the question binds each trigger and view it runs to a fingerprint of its definition."""

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
CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER);
INSERT INTO accounts VALUES (1, 100), (2, 100);
CREATE TABLE transfers (id INTEGER PRIMARY KEY, account INTEGER, amount INTEGER);
CREATE TRIGGER apply AFTER INSERT ON transfers BEGIN
    UPDATE accounts SET balance = balance - new.amount WHERE id = new.account;
END;
CREATE TABLE items (id INTEGER PRIMARY KEY, kind TEXT);
INSERT INTO items VALUES (1, 'old'), (2, 'new');
CREATE VIEW stale AS SELECT id FROM items WHERE kind = 'old';
"""

REPLACED = {
    "INSERT INTO transfers (account, amount) VALUES (1, 10)": (
        "DROP TRIGGER apply; CREATE TRIGGER apply AFTER INSERT ON transfers BEGIN "
        "UPDATE accounts SET balance = balance - new.amount * 1000 WHERE id = new.account + 1; END;"
    ),
    "DELETE FROM items WHERE id IN (SELECT id FROM stale)": (
        "DROP VIEW stale; CREATE VIEW stale AS SELECT id FROM items WHERE kind = 'new';"
    ),
}
UNTOUCHED = "SELECT (SELECT group_concat(balance) FROM accounts), (SELECT group_concat(id) FROM items)"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "code.db"
    async with served_script(path, SCHEMA) as served:
        yield served, path


def _meanwhile(path: Path, script: str) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.executescript(script)
    finally:
        connection.close()


@pytest.mark.parametrize("sql", list(REPLACED))
async def test_code_replaced_under_its_name_while_asking_does_not_run(
    database: tuple[SqliteDatabase, Path], sql: str
) -> None:
    served, path = database
    approved = await served.classify(sql)
    impact = await served.preview(approved)
    assert impact.rows_affected is not None
    _meanwhile(path, REPLACED[sql])

    with pytest.raises(ChangedSinceQuestion, match=r"the code of .* now means"):
        await served.write(approved, impact.bounds)

    assert rows(path, UNTOUCHED) == [("100,100", "1,2")]


@pytest.mark.parametrize("sql", list(REPLACED))
async def test_code_left_as_it_was_runs(database: tuple[SqliteDatabase, Path], sql: str) -> None:
    served, path = database
    approved = await served.classify(sql)
    impact = await served.preview(approved)
    _meanwhile(path, "CREATE TABLE unrelated (id INTEGER);")  # the schema changes, the code the statement runs does not

    await served.write(approved, impact.bounds)

    assert rows(path, UNTOUCHED) in ([("90,100", "1,2")], [("100,100", "2")])


async def test_the_classification_binds_the_code_of_each_trigger_and_view(
    database: tuple[SqliteDatabase, Path],
) -> None:
    served, path = database
    sql = "INSERT INTO transfers (account, amount) VALUES (1, 10)"
    before = await served.classify(sql)
    _meanwhile(path, REPLACED[sql])
    after = await served.classify(sql)

    assert before.runs == after.runs == ("apply",)
    # What a 2026-07-28 ticket binds (`changes_digest`) differs: the answer to the first question covers no other.
    assert dict(before.resolved)["the code of apply"] != dict(after.resolved)["the code of apply"]
