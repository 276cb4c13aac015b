"""Fifth red-team pass over the SQLite backend: what it found, as tests.

- A BLOB literal whose bytes are not UTF-8 (`x'ff'`, `x'deadbeef'`) made every statement holding one fail to
  classify: SQLite lists the literal as text in the compiled program, which Python could not decode.
- SQLite past its memory limit makes Python's sqlite3 raise MemoryError, not an sqlite3.Error: the call
  ended in a traceback ("Error executing tool execute_query"), and a dry run did not say why it stopped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryFailed
from safedb.sql.classification import ChangeKind
from tests.helpers import Responder, in_process_server, rows

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


# Ten values of 60 MB held at once: past the 512 MiB SQLite may hold, within the 64 MiB a value may take.
_TEN_LARGE_VALUES = ", ".join(f"x'00' || zeroblob(60000000) AS v{i}" for i in range(10))


async def test_running_out_of_memory_is_a_failure_not_a_crash(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        read = await database.classify(f"SELECT {_TEN_LARGE_VALUES}")
        with pytest.raises(QueryFailed, match="out of memory"):
            await database.read(read)

        change = await database.classify(f"UPDATE items SET name = 'c' WHERE id = 1 RETURNING {_TEN_LARGE_VALUES}")
        impact = await database.preview(change)
        assert impact.rows_affected is None
        assert impact.lines == ("Impact preview: the dry run did not finish (SQLite reported: out of memory).",)
        with pytest.raises(QueryFailed, match="out of memory"):
            await database.write(change)
        # What SQLite had done before it ran out was rolled back, and the connections work on.
        assert rows(database_file, "SELECT name FROM items ORDER BY id") == [("a",), ("b",)]
        assert (await database.read(await database.classify("SELECT count(*) FROM items"))).rows == ((2,),)
    finally:
        await database.aclose()


async def test_running_out_of_memory_reaches_the_client_as_an_error_result(database_file: Path) -> None:
    async with (
        in_process_server(database_file) as (server, _),
        Client(server, elicitation_callback=Responder()) as client,
    ):
        result = await client.call_tool("execute_query", {"query": f"SELECT {_TEN_LARGE_VALUES}"})
    assert result.is_error
    assert "out of memory" in result.content[0].text  # type: ignore[union-attr]
