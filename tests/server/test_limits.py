"""Bounded work: a long query neither blocks other clients nor runs past its limit; big results are capped."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from safedb.db.backend import QueryLimits
from tests.helpers import in_process_server, safedb_serve

pytestmark = pytest.mark.anyio

# Counts to a billion: far longer than any limit used here.
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
HUGE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x, 'row ' || x FROM c"


async def test_ten_second_query_does_not_delay_a_small_read(demo_db: Path) -> None:
    with safedb_serve(demo_db, "--statement-timeout", "10") as server:
        long_result: list[object] = []
        small_latencies: list[float] = []

        async def long_query() -> None:
            async with Client(server.url) as client:
                started = time.monotonic()
                result = await client.call_tool("execute_query", {"query": ENDLESS})
                long_result.extend([result, time.monotonic() - started])

        async def small_reads() -> None:
            async with Client(server.url, mode="legacy") as client:
                await anyio.sleep(1)  # let the long query get going
                for _ in range(5):
                    started = time.monotonic()
                    result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM users"})
                    small_latencies.append(time.monotonic() - started)
                    assert result.structured_content is not None
                    assert result.structured_content["rows"] == [[5]]

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(long_query)
                group.start_soon(small_reads)

    result, elapsed = long_result
    assert result.is_error  # type: ignore[attr-defined]
    assert "time limit" in result.content[0].text  # type: ignore[attr-defined]
    assert 9 <= elapsed < 20  # type: ignore[operator]
    assert max(small_latencies) < 0.5, small_latencies


async def test_huge_select_is_capped_and_marked_truncated(demo_db: Path) -> None:
    async with in_process_server(demo_db, limits=QueryLimits(max_rows=1000)) as (server, _), Client(server) as client:
        result = await client.call_tool("execute_query", {"query": HUGE})
    assert result.structured_content is not None
    assert result.structured_content["truncated"] is True
    assert result.structured_content["row_count"] == 1000
    assert result.structured_content["rows"][-1] == [1000, "row 1000"]
    assert "truncated" in result.content[0].text  # type: ignore[union-attr]


async def test_result_bytes_are_capped(demo_db: Path) -> None:
    limits = QueryLimits(max_rows=100_000, max_bytes=64 * 1024)
    async with in_process_server(demo_db, limits=limits) as (server, _), Client(server) as client:
        result = await client.call_tool("execute_query", {"query": HUGE})
    assert result.structured_content is not None
    assert result.structured_content["truncated"] is True
    assert 1000 < result.structured_content["row_count"] < 10_000


async def test_cancelled_call_interrupts_the_query_and_frees_the_connection(demo_db: Path) -> None:
    limits = QueryLimits(statement_timeout=60)
    async with in_process_server(demo_db, limits=limits, readers=1) as (server, _), Client(server) as client:
        with anyio.move_on_after(1):
            await client.call_tool("execute_query", {"query": ENDLESS})
        # The only reader must be free again long before the 60 s limit.
        with anyio.fail_after(5):
            result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM users"})
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [[5]]


# Calls `printf`, so it runs on a reader in a worker thread, never on the event loop's own connection.
SMALL_READ_IN_A_THREAD = "SELECT printf('%d', count(*)) FROM users"


async def test_reads_still_waiting_for_a_reader_when_their_call_ends_never_run(demo_db: Path) -> None:
    """Five endless reads at once on one reader: four wait for it. Each call ends at its time limit; the reads
    that waited must not run afterwards (each for a whole time limit more, one after the other), holding the
    reader from the calls that come later."""
    limits = QueryLimits(statement_timeout=1)
    async with in_process_server(demo_db, limits=limits, readers=1) as (server, _):
        errors: list[str] = []

        async def endless() -> None:
            async with Client(server) as client:
                result = await client.call_tool("execute_query", {"query": ENDLESS})
            assert result.is_error
            errors.append(result.content[0].text)  # type: ignore[union-attr]

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for _ in range(5):
                    group.start_soon(endless)
            async with Client(server) as client:
                result = await client.call_tool("execute_query", {"query": SMALL_READ_IN_A_THREAD})
    assert len(errors) == 5
    assert all("1 s time limit" in error for error in errors), errors
    assert result.structured_content is not None, result.content
    assert result.structured_content["rows"] == [["5"]]


async def test_reads_of_cancelled_calls_still_waiting_for_a_reader_never_run(demo_db: Path) -> None:
    limits = QueryLimits(statement_timeout=20)
    async with in_process_server(demo_db, limits=limits, readers=1) as (server, _):

        async def endless_given_up() -> None:
            async with Client(server) as client:
                with anyio.move_on_after(1):
                    await client.call_tool("execute_query", {"query": ENDLESS})

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(endless_given_up)
        # The only reader must be free again long before the four waiting reads' 20 s limits.
        with anyio.fail_after(5):
            async with Client(server) as client:
                result = await client.call_tool("execute_query", {"query": SMALL_READ_IN_A_THREAD})
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [["5"]]


async def test_the_byte_cap_counts_values_as_json_sends_them(demo_db: Path) -> None:
    """500,000 control characters are 500,000 characters but 3 MB of JSON (`\\u0001` each), and as many emoji
    2 MB: both came back whole under a cap of 512 KiB, which counted characters."""
    async with in_process_server(demo_db) as (server, _), Client(server) as client:
        for character in (1, 0x1F600):
            sql = f"SELECT replace(printf('%.*c', 500000, 'x'), 'x', char({character})) AS v"
            result = await client.call_tool("execute_query", {"query": sql})
            assert result.structured_content is not None
            assert result.structured_content["truncated"] is True, character
            assert result.structured_content["rows"] == [], character
        plain = await client.call_tool("execute_query", {"query": "SELECT printf('%.*c', 500000, 'x') AS v"})
    assert plain.structured_content is not None
    assert plain.structured_content["truncated"] is False
    assert len(plain.structured_content["rows"][0][0]) == 500000
