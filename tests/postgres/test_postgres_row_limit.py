"""A cursor read runs with a LIMIT one row past the row cap when it has none of its own, so that PostgreSQL makes
no more rows than SafeDB keeps: a sort keeps the first rows in memory (top-N heapsort) where sorting the whole
table spilled to temporary files.

The reader's sessions here may write at most 1 MB of temporary files (`temp_file_limit`), and the table is larger
than the sort memory (`work_mem`, 4 MB), so a read that sorts the whole table fails, and one that keeps the first
rows only does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from safedb.db.backend import QueryLimits
from safedb.errors import QueryFailed
from tests.postgres.conftest import PgDatabase, database_with
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE TABLE events (id integer PRIMARY KEY, kind text NOT NULL, payload text NOT NULL)",
    "INSERT INTO events SELECT n, CASE WHEN n % 3 = 0 THEN 'a' ELSE 'b' END, repeat('x', 200) "
    "FROM generate_series(1, 50000) AS n",
    "ANALYZE events",
)


def _no_temporary_files(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        f"ALTER ROLE {READER} IN DATABASE {name} SET work_mem = '4MB'",
        f"ALTER ROLE {READER} IN DATABASE {name} SET temp_file_limit = '1MB'",
    )


@pytest.fixture(scope="module")
def pg_sorts(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _no_temporary_files) as database:
        yield database


@pytest.mark.parametrize(
    ("sql", "ids", "truncated"),
    [
        ("SELECT id, payload FROM events ORDER BY kind, id DESC", [49998, 49995, 49992, 49989, 49986], True),
        ("SELECT id, payload FROM events ORDER BY id DESC; -- newest first", [50000, 49999, 49998, 49997, 49996], True),
        ("SELECT id, payload FROM events ORDER BY id DESC OFFSET 2", [49998, 49997, 49996, 49995, 49994], True),
        ("SELECT id FROM events WHERE kind = 'a' UNION ALL SELECT id FROM events ORDER BY 1 DESC",
         [50000, 49999, 49998, 49998, 49997], True),
        ("TABLE events ORDER BY payload, id", [1, 2, 3, 4, 5], True),
        ("VALUES (3), (1), (2) ORDER BY 1", [1, 2, 3], False),
        # A LIMIT of the statement's own is kept (and a small one sorts in memory as well).
        ("SELECT id FROM events ORDER BY id DESC LIMIT 3", [50000, 49999, 49998], False),
        ("SELECT id FROM events ORDER BY id DESC FETCH FIRST 4 ROWS ONLY", [50000, 49999, 49998, 49997], False),
    ],
)  # fmt: skip
async def test_a_sorted_read_keeps_only_the_rows_it_returns(
    pg_sorts: PgDatabase, sql: str, ids: list[int], truncated: bool
) -> None:
    database = pg_sorts.open(QueryLimits(max_rows=5))
    try:
        classification = await database.classify(sql)
        assert classification.statement == sql
        result = await database.read(classification)
    finally:
        await database.aclose()
    assert [row[0] for row in result.rows] == ids
    assert result.truncated is truncated


async def test_a_sort_past_its_own_large_limit_still_needs_temporary_files(pg_sorts: PgDatabase) -> None:
    """What the reads above would meet without the row limit: this sort is too large for the sort memory."""
    database = pg_sorts.open(QueryLimits(max_rows=5))
    try:
        classification = await database.classify("SELECT id, payload FROM events ORDER BY kind, id LIMIT 50000")
        with pytest.raises(QueryFailed, match="temp_file_limit"):
            await database.read(classification)
    finally:
        await database.aclose()


async def test_the_largest_row_cap_is_a_limit_postgresql_takes(pg_sorts: PgDatabase) -> None:
    """One past it, 2**63, is out of range for a LIMIT."""
    database = pg_sorts.open(QueryLimits(max_rows=2**63 - 1))
    try:
        result = await database.read(await database.classify("SELECT id FROM events WHERE id <= 3 ORDER BY id"))
    finally:
        await database.aclose()
    assert [row[0] for row in result.rows] == [1, 2, 3]
    assert not result.truncated
