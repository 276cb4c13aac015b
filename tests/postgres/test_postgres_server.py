"""execute_query, list_tables and describe_table on PostgreSQL through a real MCP client, both protocol eras.

The server is built in-process around a `PostgresDatabase` (tests/postgres/test_postgres_serve_process.py runs
`safedb serve` itself). Every test checks the database through a connection of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from safedb.audit import SqliteAuditStore
from safedb.db.backend import QueryLimits
from safedb.server.app import build_server
from safedb.settings import Settings
from tests.helpers import SAFETY_FIELDS, Responder, audit_decisions
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

ClientFactory = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def audit(tmp_path: Path) -> Iterator[SqliteAuditStore]:
    store = SqliteAuditStore.open(tmp_path / "audit.db")
    yield store
    store.close()


@pytest.fixture(params=["legacy", "auto"])
def connect(request: pytest.FixtureRequest, pg: PgDatabase, audit: SqliteAuditStore) -> ClientFactory:
    mode = str(request.param)

    @asynccontextmanager
    async def factory(responder: Responder | None = None, limits: QueryLimits | None = None) -> AsyncIterator[Client]:
        database = pg.open(limits)
        try:
            server = build_server(Settings(), {"default": database}, audit)
            with anyio.fail_after(60):
                async with Client(server, mode=mode, elicitation_callback=responder) as client:
                    assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
                    yield client
        finally:
            await database.aclose()

    return factory


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_select_runs_without_asking(connect: ClientFactory, pg: PgDatabase) -> None:
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": "SELECT id, owner FROM accounts ORDER BY id"})
    assert not result.is_error, _text(result)
    assert responder.asked == []
    assert result.structured_content is not None
    assert result.structured_content["columns"] == ["id", "owner"]
    assert [tuple(row) for row in result.structured_content["rows"]] == pg.rows(
        "SELECT id, owner FROM accounts ORDER BY id"
    )


async def test_update_asks_and_runs_when_confirmed(
    connect: ClientFactory, pg: PgDatabase, audit: SqliteAuditStore
) -> None:
    pg.rows("INSERT INTO notes VALUES (50, 'to change') ON CONFLICT (id) DO UPDATE SET body = 'to change'")
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": "UPDATE notes SET body = 'changed' WHERE id = 50"})
    assert not result.is_error, _text(result)
    assert len(responder.asked) == 1
    question = responder.asked[0]
    assert set(question.requested_schema["properties"]) == SAFETY_FIELDS  # type: ignore[union-attr]
    assert "data change (update)" in question.message
    assert "table notes" in question.message
    assert "1 row would be affected" in question.message
    assert "postgresql safedb_writer@127.0.0.1" in question.message
    assert result.structured_content is not None
    assert result.structured_content["rows_affected"] == 1
    assert pg.rows("SELECT body FROM notes WHERE id = 50") == [("changed",)]
    sql = "UPDATE notes SET body = 'changed' WHERE id = 50"
    assert [decision for decision, logged in audit_decisions(audit) if logged == sql][-1] == "executed"


async def test_an_approval_holds_only_for_the_rows_shown(
    connect: ClientFactory, pg: PgDatabase, audit: SqliteAuditStore
) -> None:
    """A second matching row arrives while the person decides: the approved UPDATE is rolled back."""
    pg.rows("DELETE FROM notes WHERE body LIKE 'stale%'")
    pg.rows("INSERT INTO notes VALUES (60, 'stale one')")
    sql = "UPDATE notes SET body = 'fresh' WHERE body LIKE 'stale%'"
    responder = Responder()

    async def answer_after_another_row(context: Any, params: Any) -> Any:
        pg.rows("INSERT INTO notes VALUES (61, 'stale two')")
        return await responder(context, params)

    async with connect(answer_after_another_row) as client:
        result = await client.call_tool("execute_query", {"query": sql})
    assert "An approval holds for exactly 1 row" in responder.asked[0].message
    assert result.is_error
    assert "affected 2 rows, but was approved for the 1 row" in _text(result)
    unchanged = [(60, "stale one"), (61, "stale two")]
    assert pg.rows("SELECT id, body FROM notes WHERE id IN (60, 61) ORDER BY id") == unchanged
    assert [decision for decision, logged in audit_decisions(audit) if logged == sql][-3:] == [
        "requested",
        "accepted",
        "failed",
    ]


async def test_declined_drop_changes_nothing(connect: ClientFactory, pg: PgDatabase, audit: SqliteAuditStore) -> None:
    responder = Responder(action="decline")
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": "DROP TABLE accounts"})
    assert len(responder.asked) == 1
    assert "3 rows" in responder.asked[0].message
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    assert pg.rows("SELECT count(*) FROM accounts") == [(3,)]
    assert audit_decisions(audit)[-1] == ("declined", "DROP TABLE accounts")


async def test_a_volatile_function_in_a_select_asks(connect: ClientFactory, pg: PgDatabase) -> None:
    responder = Responder(action="decline")
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": "SELECT bump()"})
    assert len(responder.asked) == 1
    assert "function call" in responder.asked[0].message
    assert result.structured_content is not None
    assert result.structured_content["executed"] is False
    assert pg.rows("SELECT count(*) FROM notes WHERE id = 100") == [(0,)]


async def test_client_without_elicitation_is_refused(connect: ClientFactory, pg: PgDatabase) -> None:
    async with connect(None) as client:
        result = await client.call_tool("execute_query", {"query": "DELETE FROM accounts"})
        read = await client.call_tool("execute_query", {"query": "SELECT count(*) AS n FROM accounts"})
    assert result.is_error
    assert "elicitation" in _text(result)
    assert read.structured_content is not None
    assert read.structured_content["rows"] == [[3]]
    assert pg.rows("SELECT count(*) FROM accounts") == [(3,)]


async def test_refusals_are_clear_and_ask_nothing(connect: ClientFactory, pg: PgDatabase) -> None:
    responder = Responder()
    async with connect(responder) as client:
        multiple = await client.call_tool("execute_query", {"query": "SELECT 1; DELETE FROM accounts"})
        begin = await client.call_tool("execute_query", {"query": "BEGIN READ WRITE"})
        role = await client.call_tool("execute_query", {"query": "SET ROLE postgres"})
    assert responder.asked == []
    assert "more than one statement" in _text(multiple)
    assert "Transaction control" in _text(begin)
    assert "role" in _text(role)
    assert all(result.is_error for result in (multiple, begin, role))
    assert pg.rows("SELECT count(*) FROM accounts") == [(3,)]


async def test_result_caps_and_timeouts_through_the_tool(connect: ClientFactory) -> None:
    async with connect(Responder(), QueryLimits(max_rows=10, statement_timeout=0.5)) as client:
        capped = await client.call_tool("execute_query", {"query": "SELECT * FROM generate_series(1, 1000) AS n"})
        slow = await client.call_tool("execute_query", {"query": "SELECT pg_sleep(10)"})
    assert capped.structured_content is not None
    assert capped.structured_content["row_count"] == 10
    assert capped.structured_content["truncated"] is True
    assert slow.is_error
    assert "time limit" in _text(slow)


async def test_list_and_describe_tables(connect: ClientFactory) -> None:
    async with connect(Responder()) as client:
        listed = await client.call_tool("list_tables", {})
        described = await client.call_tool("describe_table", {"name": "accounts"})
        missing = await client.call_tool("describe_table", {"name": "accounts; DROP TABLE accounts"})
    assert listed.structured_content is not None
    tables = {table["name"]: table["type"] for table in listed.structured_content["tables"]}
    assert tables["accounts"] == "table"
    assert tables["loud_notes"] == "view"
    assert described.structured_content is not None
    assert [column["name"] for column in described.structured_content["columns"]] == ["id", "owner", "balance"]
    assert described.structured_content["columns"][0]["primary_key"] is True
    assert "nextval" in described.structured_content["columns"][0]["default"]
    assert described.structured_content["row_count"] == 3
    assert missing.is_error
