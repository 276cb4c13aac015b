"""Large values on the PostgreSQL read path: PostgreSQL leaves out what is past the size guard, so a read
cannot make SafeDB fetch more than about its byte cap, and results within the caps are as they were."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator

import pytest

from safedb.db.backend import QueryLimits, ResultSet
from safedb.db.postgres import PostgresDatabase
from safedb.db.postgres.results import SERVER_BUDGET_FACTOR, pg_value, size_guarded
from safedb.db.results import CappedRows
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio


@pytest.fixture
async def database(pg: PgDatabase) -> AsyncIterator[PostgresDatabase]:
    opened = pg.open()
    try:
        yield opened
    finally:
        await opened.aclose()


def fetched_whole(pg: PgDatabase, sql: str, limits: QueryLimits) -> ResultSet:
    """The statement's rows as SafeDB capped them before the guard: fetched whole (a row at a time, through a
    server-side cursor), then capped."""
    with pg.server.connect(pg.name) as connection, connection.transaction():
        cursor = connection.cursor(name="unguarded")
        cursor.itersize = 1
        cursor.execute(sql.encode())
        capped = CappedRows([column.name for column in cursor.description or ()], limits, pg_value)
        for raw in cursor:
            if not capped.add(raw):
                break
        cursor.close()
        return capped.result()


async def read(database: PostgresDatabase, sql: str) -> ResultSet:
    return await database.read(await database.classify(sql))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS a, 2 AS a",
        "SELECT FROM generate_series(1, 3)",
        "SELECT 'x' AS whole_row, 2 AS over_budget, 3 AS safedb_kept, 4 AS safedb_guard, ROW(5, 'y') AS rec",
        "SELECT id, owner, balance FROM accounts ORDER BY balance DESC -- the rest of the line is a comment",
        "/* first */ SELECT * FROM notes ORDER BY id",
        "TABLE accounts",
        "VALUES (1, 'one'), (2, NULL)",
        "(SELECT 1 AS n) UNION ALL (SELECT 2) ORDER BY n",
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT n FROM t",
        "SELECT '\\x00ff'::bytea, 1.50::numeric, '{\"a\": [1, \"b\"]}'::jsonb, ARRAY['x', NULL], NULL, true",
        "SELECT pg_sleep(0), now()::date, 9223372036854775807::bigint",
        "SELECT n FROM generate_series(1, 2000) AS n ORDER BY n DESC",
        "SELECT n, repeat(chr(8364), 3000) FROM generate_series(1, 200) AS n",
        "SELECT 1;  -- a trailing semicolon and comment",
    ],
)
async def test_results_within_the_caps_are_what_postgresql_returns(
    pg: PgDatabase, database: PostgresDatabase, sql: str
) -> None:
    assert await read(database, sql) == fetched_whole(pg, sql, database.limits)


@pytest.mark.parametrize(
    "value",
    [
        "repeat('\"', 100000)",  # doubled inside a row's text
        "repeat('\\', 100000)",
        "decode(repeat('ff', 100000), 'hex')",  # bytea: hex in the text, base64 in the result
        "-1.2345678901234567e-300::float8",  # a number SafeDB counts as 8
        "-9223372036854775807::bigint",
        "NULL",
        "''",
    ],
)
async def test_the_guard_stops_a_read_only_after_the_byte_cap_would_have(pg: PgDatabase, value: str) -> None:
    """Values whose text in a row is longest against what SafeDB counts for them: SafeDB's own cap still
    decides where the result ends."""
    limits = QueryLimits(max_rows=100_000, max_bytes=256 * 1024)
    sql = f"SELECT {value} AS a, {value} AS b FROM generate_series(1, 70000)"  # '' counts 4 bytes a row
    database = pg.open(limits)
    try:
        result = await read(database, sql)
    finally:
        await database.aclose()
    expected = fetched_whole(pg, sql, limits)
    assert result == expected
    assert result.truncated


def test_postgresql_leaves_out_every_value_past_the_budget(pg: PgDatabase) -> None:
    limits = QueryLimits(max_bytes=1000)
    per_row = 300  # the row's text: "(" + 298 characters + ")"
    guarded = size_guarded(f"SELECT repeat('x', {per_row - 2}) AS v FROM generate_series(1, 50)", limits)
    with pg.server.connect(pg.name) as connection:
        rows = connection.execute(guarded.encode()).fetchall()
    within = SERVER_BUDGET_FACTOR * limits.max_bytes // per_row
    assert rows[:within] == [("x" * (per_row - 2), False)] * within
    assert rows[within:] == [(None, True)] * (50 - within)


_MEASURED = textwrap.dedent(
    """
    import sys, anyio
    from safedb.db.backend import QueryLimits
    from safedb.db.postgres import PostgresDatabase

    def peak():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) // 1024

    async def main(reader, writer, calls):
        database = PostgresDatabase(reader, QueryLimits(), writer_dsn=writer)
        try:
            await database.read(await database.classify("SELECT repeat('x', 1000) FROM generate_series(1, 600)"))
            before = peak()
            for call in calls.split("|"):
                kind, sql = call.split(":", 1)
                classification = await database.classify(sql)
                if kind == "read":
                    result = await database.read(classification)
                    print(f"read truncated={result.truncated} rows={len(result.rows)}")
                elif kind == "preview":
                    print("preview", *(await database.preview(classification)).lines)
                else:
                    outcome = await database.write(classification)
                    returned = outcome.returned
                    print(f"write affected={outcome.rows_affected} truncated={returned.truncated} "
                          f"rows={len(returned.rows)}")
            print("growth", peak() - before)
        finally:
            await database.aclose()

    anyio.run(main, *sys.argv[1:])
    """
)


def measured(pg: PgDatabase, *calls: str) -> tuple[int, list[str]]:
    """Run `kind:sql` calls (read, preview or write) in a process of their own: how much its peak memory
    grew (MiB) and what each call printed."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, pg.reader_url(), pg.writer_url(), "|".join(calls)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *printed, growth = done.stdout.splitlines()
    return int(growth.removeprefix("growth ")), printed


def test_reads_of_large_values_keep_the_server_process_small(pg: PgDatabase) -> None:
    """Before the guard, these reads made the process fetch every value whole: about 340 MiB more memory,
    all of it left out of the result."""
    growth, printed = measured(
        pg,
        "read:SELECT repeat('x', 100000000) AS v",
        "read:SELECT repeat('x', 1000000) AS v FROM generate_series(1, 128)",
    )
    assert printed == ["read truncated=True rows=0"] * 2
    assert growth < 64, f"the reads grew the process by {growth} MiB"


def test_dry_runs_and_writes_returning_large_values_take_them_a_row_at_a_time(pg: PgDatabase) -> None:
    """The rows a data change returns: the dry run, before anyone approved anything, fetched all of them at
    once (244 MiB more for these two calls); now it holds one row at a time, and so does the write."""
    pg.run_as_owner("CREATE TABLE wide_rows AS SELECT generate_series(1, 128) AS id")
    returning = "UPDATE wide_rows SET id = id RETURNING repeat('x', 1000000) AS v"
    growth, printed = measured(pg, f"preview:{returning}", f"write:{returning}")
    assert printed[0].startswith("preview 128 rows would be affected (update), measured by a dry run")
    assert printed[1] == "write affected=128 truncated=True rows=0"
    assert growth < 64, f"the calls grew the process by {growth} MiB"


def test_the_guard_reads_the_statement_only_as_far_as_the_rows_fetched(pg: PgDatabase) -> None:
    """Its running total does not make PostgreSQL read the statement to the end first: a sequence called
    once per row shows how many rows were made."""
    sql = "SELECT n, nextval('guard_probe') FROM generate_series(1, 100000) AS n"
    with pg.server.connect(pg.name) as connection:
        connection.execute("CREATE SEQUENCE guard_probe")
        try:
            with connection.transaction():
                cursor = connection.cursor(name="probe")
                cursor.execute(size_guarded(sql, QueryLimits()).encode())
                first = cursor.fetchmany(3)
                cursor.close()
            made = connection.execute("SELECT last_value FROM guard_probe").fetchone()
        finally:
            connection.execute("DROP SEQUENCE guard_probe")
    assert first == [(1, 1, False), (2, 2, False), (3, 3, False)]
    assert made is not None
    assert made[0] <= 10
