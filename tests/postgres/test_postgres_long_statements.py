"""Long statements: analysing one is seconds of Python, which must not run on the event loop."""

from __future__ import annotations

import anyio
import pytest

from safedb.db.backend import ResultSet
from tests.helpers import watching_the_loop
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio


async def test_a_long_statement_is_analysed_off_the_event_loop(pg: PgDatabase) -> None:
    """Parsing a statement (in a thread of its own, for its large stack) and walking its tree ran on the event
    loop: for 400,000 characters of `SELECT 1 IN (1, 1, ...)` the loop stood still for over a second, and four
    reads of 1,000,000 characters at once held up every other call of `safedb serve` for 16 s."""
    sql = "SELECT 2 IN (" + ",".join(["1"] * 200_000) + ")"
    database = pg.open()

    async def classify_and_read() -> ResultSet:
        return await database.read(await database.classify(sql))

    try:
        result, longest = await watching_the_loop(classify_and_read)
    finally:
        await database.aclose()
    assert result.rows == ((False,),)
    assert longest < 0.5, f"the event loop was held up for {longest:.3f} s"


async def test_a_long_statement_does_not_wait_behind_a_huge_one(pg: PgDatabase) -> None:
    """Only statements over `LONG_STATEMENT_CHARS` are analysed one at a time: a statement of a few thousand
    characters (generated SQL, a multi-row INSERT awaiting approval) is not queued behind a huge read's
    seconds of parsing."""
    huge = "SELECT 3 IN (" + ",".join(["1"] * 400_000) + ")"
    long = "SELECT 4 IN (" + ",".join(["1"] * 2_000) + ")"
    database = pg.open()
    finished: list[str] = []

    async def classify(name: str, sql: str) -> None:
        await database.classify(sql)
        finished.append(name)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(classify, "huge", huge)
            await anyio.sleep(0.05)  # the huge one is being analysed
            group.start_soon(classify, "long", long)
    finally:
        await database.aclose()
    assert finished == ["long", "huge"]


async def test_a_long_function_body_is_read_off_the_event_loop(pg: PgDatabase) -> None:
    """A read that calls a user-defined function has its body read (`postgres_bodies.read_body`) every time: for a
    body of 400,000 characters the loop stood still for over a second on each such call."""
    assignments = " ".join(f"x := (SELECT count(*) FROM notes WHERE id = {i});" for i in range(8_000))
    pg.run_as_owner(
        "CREATE FUNCTION long_body() RETURNS integer LANGUAGE plpgsql STABLE AS "
        f"$$ DECLARE x integer; BEGIN {assignments} RETURN x; END $$"
    )
    database = pg.open()

    async def classify_and_read() -> ResultSet:
        classification = await database.classify("SELECT long_body()")
        assert classification.read_only
        return await database.read(classification)

    try:
        result, longest = await watching_the_loop(classify_and_read)
    finally:
        await database.aclose()
    assert result.rows == ((0,),)
    assert longest < 0.5, f"the event loop was held up for {longest:.3f} s"
