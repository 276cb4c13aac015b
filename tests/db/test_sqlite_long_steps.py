"""One call that builds a large value is a single step of SQLite's program, which no progress handler sees:
such statements run off the event loop, their time limit still holds, values have a size limit, and rows
past the result caps are never fetched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from safedb.db.backend import QueryLimits
from safedb.db.results import fetch_capped
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.connections import MAX_VALUE_BYTES
from safedb.errors import QueryFailed, QueryTimeout

pytestmark = pytest.mark.anyio

# Each call builds a 60-million-character string in one step: several tenths of a second each.
LONG_CALLS = [f"length(printf('%.*c', 60000000, '{c}'))" for c in "abcd"]
LONG_STEPS = "SELECT " + ", ".join(LONG_CALLS)


async def test_a_read_of_long_single_steps_leaves_the_event_loop_free(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=30))
    finished: list[str] = []

    async def long_read() -> None:
        await database.read(await database.classify(LONG_STEPS))
        finished.append("long")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(long_read)
            await anyio.sleep(0.05)  # the long read has started
            await database.read(await database.classify("SELECT name FROM items"))
            finished.append("short")
    finally:
        await database.aclose()

    assert finished == ["short", "long"]


@pytest.mark.parametrize("statement", [LONG_STEPS, f"DELETE FROM items WHERE {' + '.join(LONG_CALLS)} > 0"])
async def test_the_time_limit_holds_even_when_no_step_ends_in_time(database_file: Path, statement: str) -> None:
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=0.3, preview_timeout=0.3))
    try:
        classification = await database.classify(statement)
        run = database.read if classification.read_only else database.preview
        with pytest.raises(QueryTimeout):
            await run(classification)
    finally:
        await database.aclose()


async def test_values_past_the_size_limit_are_refused_by_sqlite(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        with pytest.raises(QueryFailed, match="too big"):
            await database.read(await database.classify(f"SELECT zeroblob({MAX_VALUE_BYTES + 1})"))
        result = await database.read(await database.classify(f"SELECT length(zeroblob({MAX_VALUE_BYTES}))"))
    finally:
        await database.aclose()
    assert result.rows == ((MAX_VALUE_BYTES,),)


def test_no_row_past_the_caps_is_fetched() -> None:
    fetched: list[int] = []

    def rows() -> Iterator[tuple[object, ...]]:
        for number in range(100):
            fetched.append(number)
            yield (number, b"\0" * 1_000_000 if number == 3 else b"small")

    result = fetch_capped(rows(), ["n", "blob"], QueryLimits(max_bytes=512 * 1024))
    assert result.truncated
    assert [row[0] for row in result.rows] == [0, 1, 2]
    assert fetched == [0, 1, 2, 3]
