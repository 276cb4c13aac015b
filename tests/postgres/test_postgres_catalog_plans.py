"""The function query, which every classification runs, is prepared once in each reader's session and run with a
generic plan and a small work_mem (`catalog.CATALOG_SETTINGS`); a writer sends it as it is, and an approved
statement still runs with the session's own settings."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest

from safedb.db.backend import Bounds
from safedb.db.postgres import catalog
from safedb.db.postgres.connections import Connection, read_transaction
from safedb.sql.postgres_classifier import analyze_statement
from safedb.sql.postgres_functions import CatalogFunction
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

STATEMENTS = (
    "SELECT double_it(id) FROM accounts",
    "SELECT * FROM calm_over_loud",
    "SELECT owner || 'x' FROM accounts WHERE balance > 10 ORDER BY owner",
    "DELETE FROM notes WHERE id = 1",
    "SELECT bump(), shout(owner)::text FROM accounts",
)


async def _connection(url: str, *, read_only: bool) -> Connection:
    connection = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await connection.set_read_only(read_only)
    return connection


@pytest.fixture
async def reader(pg: PgDatabase) -> AsyncIterator[Connection]:
    connection = await _connection(pg.reader_url(), read_only=True)
    yield connection
    await connection.close()


async def _facts(connection: Connection, sql: str) -> list[CatalogFunction]:
    async with read_transaction(connection):
        await catalog.for_catalog_queries(connection)
        return await catalog.function_facts(connection, [analyze_statement(sql)])


async def _plans(connection: Connection) -> list[tuple[int, int]]:
    cursor = await connection.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'safedb_function_facts'"
    )
    return [(int(generic), int(custom)) for generic, custom in await cursor.fetchall()]


async def test_a_readers_session_prepares_the_function_query_once_and_plans_it_once(reader: Connection) -> None:
    for sql in STATEMENTS:
        await _facts(reader, sql)
    # Each read transaction rolled back: the statement outlives them, and every run used the one generic plan.
    assert await _plans(reader) == [(len(STATEMENTS), 0)]


@pytest.mark.parametrize("sql", STATEMENTS)
async def test_the_prepared_query_finds_what_the_query_sent_as_it_is_finds(
    pg: PgDatabase, reader: Connection, sql: str
) -> None:
    writer = await _connection(pg.writer_url(), read_only=False)
    try:
        sent_as_it_is = await _facts(writer, sql)
        assert await _plans(writer) == []  # a writer's session is reset with DISCARD ALL: nothing is prepared there
    finally:
        await writer.close()
    await _facts(reader, sql)  # prepares
    prepared = await _facts(reader, sql)
    assert sorted(prepared, key=repr) == sorted(sent_as_it_is, key=repr)
    assert prepared


async def test_types_met_are_passed_to_the_prepared_query_as_oids(pg: PgDatabase, reader: Connection) -> None:
    pg.run_as_owner(
        "CREATE FUNCTION is_even(integer) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 % 2 = 0 $$",
        "CREATE DOMAIN even_number AS integer CHECK (is_even(VALUE))",
    )
    (even_number,) = pg.rows("SELECT 'even_number'::regtype::oid")[0]
    statement = analyze_statement("SELECT 1")

    async def facts(connection: Connection) -> list[CatalogFunction]:
        async with read_transaction(connection):
            await catalog.for_catalog_queries(connection)
            return await catalog.function_facts(connection, [statement], [even_number])

    writer = await _connection(pg.writer_url(), read_only=False)
    try:
        sent_as_it_is = await facts(writer)
    finally:
        await writer.close()
    prepared = await facts(reader)
    assert [function.name for function in prepared] == ["is_even"]
    assert prepared == sent_as_it_is


async def test_a_session_whose_statement_was_deallocated_prepares_it_again(reader: Connection) -> None:
    """A reader's session cannot deallocate it (DEALLOCATE is refused); should it happen anyway, one call fails and
    the next prepares it again, rather than every later call in that session failing."""
    await _facts(reader, STATEMENTS[0])
    await reader.execute("DEALLOCATE safedb_function_facts")
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        await _facts(reader, STATEMENTS[0])
    assert await _facts(reader, STATEMENTS[0])
    assert await _plans(reader) == [(1, 0)]


async def test_a_call_cancelled_while_the_statement_is_prepared_closes_the_session(reader: Connection) -> None:
    """A statement the server prepared but SafeDB did not note would make the session's next PREPARE fail. A call
    cancelled while it prepares (its client gave up) leaves no such session in use: psycopg closes it, and the pool
    replaces a closed session."""
    with anyio.move_on_after(0.001):
        await _facts(reader, STATEMENTS[0])
    assert reader.closed


async def _settings(connection: Connection) -> dict[str, str]:
    names = [*catalog.CATALOG_SETTINGS, "plan_cache_mode"]
    cursor = await connection.execute("SELECT name, current_setting(name) FROM unnest(%s::text[]) AS name", (names,))
    return {str(name): str(value) for name, value in await cursor.fetchall()}


async def test_settings_last_only_for_the_catalog_transaction(reader: Connection) -> None:
    async with read_transaction(reader):
        await catalog.for_catalog_queries(reader)
        during = await _settings(reader)
        await catalog.with_session_settings(reader)
        restored = await _settings(reader)
    after = await _settings(reader)
    assert during == {**catalog.CATALOG_SETTINGS, "plan_cache_mode": "force_generic_plan"}
    assert restored == after
    assert after["work_mem"] != "2MB"
    assert after["enable_hashjoin"] == "on"
    assert after["plan_cache_mode"] == "auto"


async def test_an_approved_change_runs_with_the_sessions_settings_not_the_catalog_queries(pg: PgDatabase) -> None:
    settings = " || ' ' || ".join(f"current_setting('{name}')" for name in catalog.CATALOG_SETTINGS)
    session = pg.rows(f"SELECT {settings}")
    database = pg.open()
    try:
        approved = await database.classify(f"INSERT INTO notes SELECT 7000, {settings}")
        preview = await database.preview(approved)
        assert preview.rows_affected == 1
        # With a count to hold to, the approved run checks the catalog again in its own transaction first.
        await database.write(approved, Bounds(rows=preview.rows_affected))
    finally:
        await database.aclose()
    assert pg.rows("SELECT body FROM notes WHERE id = 7000") == session
