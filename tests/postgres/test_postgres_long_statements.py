"""Long statements: analysing one is seconds of Python, which must not run on the event loop."""

from __future__ import annotations

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
