"""Fifth red-team pass over the SQLite backend: what it found, as tests.

- A BLOB literal whose bytes are not UTF-8 (`x'ff'`, `x'deadbeef'`) made every statement holding one fail to
  classify: SQLite lists the literal as text in the compiled program, which Python could not decode.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.sql.classification import ChangeKind

pytestmark = pytest.mark.anyio


async def test_a_blob_literal_that_is_not_utf8_is_classified(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        read = await database.classify("SELECT count(*) FROM items WHERE name = x'deadbeef' OR name = x'ff'")
        assert read.read_only
        assert (await database.read(read)).rows == ((0,),)
        insert = await database.classify("INSERT INTO items (name) VALUES (x'ff')")
        assert insert.kinds == (ChangeKind.INSERT,)
        # The inspector decodes strictly again afterwards: names from the catalog are read as they are.
        assert (await database.classify("SELECT name FROM items")).read_only
    finally:
        await database.aclose()
