"""Red team, eleventh pass on SQLite: a change that can tell its dry run from its approved run.

The impact preview's dry run runs with settings of its own (`temp_store = MEMORY`, `cache_spill = OFF`), which
a statement could read through the pragmas' table-valued forms, and so change one thing while measured and another
once approved: an UPDATE shown as two rows overwrote four, a trigger's rows making up the count the approval held;
an INSERT OR REPLACE shown as no rows replaced five. A change may no longer read its connection's settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import DeniedByPolicy
from tests.db.conftest import served_script

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE acct (id INTEGER PRIMARY KEY, owner TEXT, balance INTEGER);
INSERT INTO acct VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40), (5, 'e', 50), (6, 'f', 60);
CREATE TABLE alerts (acct_id INTEGER, note TEXT);
CREATE TRIGGER big_change AFTER UPDATE ON acct WHEN new.balance > 1000
  BEGIN INSERT INTO alerts VALUES (new.id, 'large balance'); END;
CREATE TABLE src (id INTEGER PRIMARY KEY, v TEXT);
INSERT INTO src VALUES (1, 'X'), (2, 'X');
CREATE VIEW settings AS SELECT temp_store FROM pragma_temp_store;
CREATE TABLE audit (n INTEGER);
CREATE TRIGGER src_logged AFTER DELETE ON src BEGIN INSERT INTO audit SELECT cache_spill FROM pragma_cache_spill; END;
"""

IN_DRY_RUN = "(SELECT temp_store FROM pragma_temp_store) = 2"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    async with served_script(tmp_path / "tells.db", SCHEMA) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        f"UPDATE acct SET balance = CASE WHEN {IN_DRY_RUN} THEN 5000 ELSE 0 END "
        f"WHERE id <= CASE WHEN {IN_DRY_RUN} THEN 2 ELSE 4 END",
        f"INSERT OR REPLACE INTO acct (id, owner) SELECT id, v FROM src WHERE NOT {IN_DRY_RUN}",
        "DELETE FROM acct WHERE id > CASE WHEN (SELECT cache_spill FROM pragma_cache_spill) = 0 "
        "THEN abs(-9223372036854775807 - 1) ELSE 3 END",
        "DELETE FROM acct WHERE id IN (SELECT data_version FROM pragma_data_version)",
        "UPDATE acct SET balance = 0 WHERE id = (SELECT temp_store FROM settings)",  # through a view
        "DELETE FROM src WHERE id = 1",  # through a trigger
    ],
)
async def test_a_change_reading_its_connections_settings_is_refused(served: SqliteDatabase, sql: str) -> None:
    with pytest.raises(DeniedByPolicy, match="the dry run that measures a change's impact"):
        await served.classify(sql)


async def test_reads_and_changes_reading_the_files_settings_are_not(served: SqliteDatabase) -> None:
    read = await served.classify("SELECT temp_store, cache_spill FROM pragma_temp_store, pragma_cache_spill")
    assert read.read_only
    change = await served.classify(
        "INSERT INTO alerts SELECT user_version, name FROM pragma_user_version, pragma_table_info('acct')"
    )
    assert not change.read_only
