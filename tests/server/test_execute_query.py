"""execute_query end to end, in both protocol eras, in-process and against a real `safedb serve` process.

Every test checks the database through a connection of its own, not only the tool's text.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer

from safedb.audit import SqliteAuditStore
from safedb.db.sqlite import SqliteDatabase
from safedb.server.app import build_server
from safedb.settings import Settings
from tests.helpers import SAFETY_FIELDS, Responder, ServerProcess, rows, safedb_serve, scratch_table
from tests.helpers import in_process_server as server_for

pytestmark = pytest.mark.anyio

ClientFactory = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture(scope="module")
def served(shared_db: Path) -> Iterator[ServerProcess]:
    with safedb_serve(shared_db) as server:
        yield server


@pytest.fixture(scope="module")
def in_process_server(shared_db: Path) -> Iterator[MCPServer]:
    settings = Settings()
    database = SqliteDatabase(shared_db, settings.limits)
    audit = SqliteAuditStore.open(shared_db.parent / "audit.db")
    yield build_server(settings, {"default": database}, audit)
    anyio.run(database.aclose)
    audit.close()


@pytest.fixture(params=["in-process", "http"])
def target(request: pytest.FixtureRequest) -> Any:
    if request.param == "http":
        return request.getfixturevalue("served").url
    return request.getfixturevalue("in_process_server")


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def connect(target: Any, mode: str) -> ClientFactory:
    @asynccontextmanager
    async def factory(responder: Responder | None = None) -> AsyncIterator[Client]:
        async with Client(target, mode=mode, elicitation_callback=responder) as client:
            expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
            assert client.protocol_version == expected
            yield client

    return factory


async def test_select_returns_rows_without_asking(connect: ClientFactory, shared_db: Path) -> None:
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": "SELECT id, name FROM users ORDER BY id"})
    assert not result.is_error
    assert responder.asked == []
    assert result.structured_content is not None
    assert result.structured_content["columns"] == ["id", "name"]
    assert [tuple(row) for row in result.structured_content["rows"]] == rows(
        shared_db, "SELECT id, name FROM users ORDER BY id"
    )
    assert result.structured_content["truncated"] is False
    assert "Ada Lovelace" in result.content[0].text  # type: ignore[union-attr]


async def test_delete_asks_with_the_three_field_form_and_runs_when_confirmed(
    connect: ClientFactory, shared_db: Path
) -> None:
    table = scratch_table(shared_db)
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": f"DELETE FROM {table} WHERE id = 2"})
    assert not result.is_error, result.content
    assert len(responder.asked) == 1
    question = responder.asked[0]
    schema = question.requested_schema  # type: ignore[union-attr]
    assert set(schema["properties"]) == SAFETY_FIELDS
    assert schema["properties"]["confirm"]["type"] == "boolean"
    assert schema["properties"]["environment"]["enum"] == ["Development", "Staging", "Production"]
    assert f"DELETE FROM {table} WHERE id = 2" in question.message
    assert "delete" in question.message
    assert f"table {table}" in question.message
    assert rows(shared_db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (3,)]
    assert result.structured_content is not None
    assert result.structured_content["rows_affected"] == 1


async def test_the_question_shows_what_blanks_and_hidden_characters_would_keep_out_of_sight(
    connect: ClientFactory, shared_db: Path
) -> None:
    table = scratch_table(shared_db)
    responder = Responder(action="decline")
    query = f"DELETE FROM {table} WHERE id = 2" + " " * 3000 + "OR label <> '\u202e'"
    async with connect(responder) as client:
        await client.call_tool("execute_query", {"query": query})
    statement_line = next(line for line in responder.asked[0].message.splitlines() if line.startswith("Statement:"))
    assert statement_line == f"Statement: DELETE FROM {table} WHERE id = 2⟨3,000 blanks⟩OR label <> '⟨U+202E⟩'"
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]


@pytest.mark.parametrize(
    ("answer", "status", "word"),
    [
        ({"action": "decline"}, "declined", "declined"),
        ({"action": "cancel"}, "cancelled", "cancelled"),
        (
            {"content": {"confirm": False, "justification": "not sure", "environment": "Development"}},
            "not_confirmed",
            "not confirmed",
        ),
        (
            {"content": {"confirm": True, "justification": "oops!", "environment": "Production"}},
            "blocked",
            "justification",
        ),
        (
            {"content": {"confirm": True, "justification": "\u200b" * 12, "environment": "Production"}},
            "blocked",
            "justification",
        ),
        (
            {"content": {"confirm": "yes", "justification": "not sure", "environment": "Development"}},
            "invalid",
            "did not match",
        ),
    ],
    ids=[
        "decline",
        "cancel",
        "confirm-false",
        "production-short-justification",
        "production-invisible-justification",
        "confirm-as-text",
    ],
)
async def test_anything_but_a_confirmed_approval_changes_nothing(
    connect: ClientFactory, shared_db: Path, answer: dict[str, Any], status: str, word: str
) -> None:
    table = scratch_table(shared_db)
    responder = Responder(**answer)
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    assert len(responder.asked) == 1
    assert result.structured_content is not None
    assert result.structured_content["status"] == status
    assert result.structured_content["executed"] is False
    assert word in result.content[0].text  # type: ignore[union-attr]
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]


async def test_an_answer_that_is_no_elicitation_result_counts_as_cancelled(
    served: ServerProcess, shared_db: Path
) -> None:
    """Raw HTTP, as no SDK client would send it: an `elicitation/create` answered with action "approve"."""
    table = scratch_table(shared_db)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    url = served.url
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        opened = await http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        http.headers.update({"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"})
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "execute_query", "arguments": {"query": f"DELETE FROM {table}"}}
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        messages = []
        async with http.stream("POST", url, json=request) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                message = json.loads(line.removeprefix("data: "))
                messages.append(message)
                if message.get("method") == "elicitation/create":
                    bogus = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "approve"}}
                    assert (await http.post(url, json=bogus)).status_code == 202
                elif message.get("id") == 1:
                    break
    assert messages[-1]["result"]["structuredContent"]["status"] == "cancelled", messages[-1]
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]


async def test_production_with_a_real_justification_runs(connect: ClientFactory, shared_db: Path) -> None:
    table = scratch_table(shared_db)
    responder = Responder(
        content={"confirm": True, "justification": "GDPR erasure request", "environment": "Production"}
    )
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": f"DELETE FROM {table} WHERE id = 3"})
    assert not result.is_error, result.content
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(2,)]


async def test_client_without_elicitation_is_refused_and_nothing_changes(
    connect: ClientFactory, shared_db: Path
) -> None:
    table = scratch_table(shared_db)
    async with connect(None) as client:
        result = await client.call_tool("execute_query", {"query": f"DROP TABLE {table}"})
        read = await client.call_tool("execute_query", {"query": f"SELECT count(*) AS n FROM {table}"})
    assert result.is_error
    assert "elicitation" in result.content[0].text  # type: ignore[union-attr]
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]
    assert not read.is_error
    assert read.structured_content is not None
    assert read.structured_content["rows"] == [[3]]


async def test_multiple_statements_are_refused_and_none_runs(connect: ClientFactory, shared_db: Path) -> None:
    table = scratch_table(shared_db)
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool("execute_query", {"query": f"SELECT 1; DELETE FROM {table}"})
    assert result.is_error
    assert "more than one statement" in result.content[0].text  # type: ignore[union-attr]
    assert responder.asked == []
    assert rows(shared_db, f"SELECT count(*) FROM {table}") == [(3,)]


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("execute_query", {}, "`query` is missing"),
        ("execute_query", {"query": 5}, "`query` must be text, not a number"),
        ("execute_query", {"query": None}, "`query` must be text, not null"),
        ("execute_query", {"query": {"sql": "DELETE FROM users"}}, "`query` must be text, not an object"),
        ("execute_query", {"query": "DELETE FROM users", "target": 3}, "`target` must be text, not a number"),
        ("describe_table", {"table": "users"}, "`name` is missing"),
    ],
)
async def test_arguments_that_do_not_fit_the_schema_are_told_in_plain_words_and_nothing_runs(
    connect: ClientFactory, shared_db: Path, tool: str, arguments: dict[str, Any], problem: str
) -> None:
    users = rows(shared_db, "SELECT * FROM users")
    responder = Responder()
    async with connect(responder) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    takes = "`name` (required), `target` (optional)" if tool == "describe_table" else "`query` (required)"
    assert text.startswith(f"Invalid arguments for {tool}: {problem}. It takes {takes}")
    assert result.structured_content is not None  # a script reads why: README's `jq -r .structuredContent.status`
    assert result.structured_content["status"] == "refused"
    assert "pydantic" not in text  # nor its link
    assert "Arguments" not in text  # the model's name
    assert responder.asked == []
    assert rows(shared_db, "SELECT * FROM users") == users


def test_the_server_says_where_its_audit_log_is(served: ServerProcess, shared_db: Path) -> None:
    assert f"audit log: {(shared_db.parent / 'audit.db').resolve()}\n" in served.log


async def test_list_and_describe_tables(connect: ClientFactory) -> None:
    async with connect(Responder()) as client:
        listed = await client.call_tool("list_tables", {})
        described = await client.call_tool("describe_table", {"name": "invoices"})
        missing = await client.call_tool("describe_table", {"name": "users; DROP TABLE users"})
    assert listed.structured_content is not None
    names = {table["name"] for table in listed.structured_content["tables"]}
    assert {"users", "invoices"} <= names
    assert described.structured_content is not None
    assert [c["name"] for c in described.structured_content["columns"]] == [
        "id", "user_id", "amount_cents", "status", "issued_at",
    ]  # fmt: skip
    assert described.structured_content["row_count"] == 8
    assert missing.is_error
    assert "no table or view" in missing.content[0].text  # type: ignore[union-attr]


async def test_tool_annotations_tell_reads_from_changes(connect: ClientFactory) -> None:
    async with connect(None) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["execute_query"].annotations is not None
    assert tools["execute_query"].annotations.read_only_hint is False
    assert tools["execute_query"].annotations.destructive_hint is True
    for name in ("list_tables", "describe_table"):
        annotations = tools[name].annotations
        assert annotations is not None
        assert annotations.read_only_hint is True


async def test_describing_a_broken_view_says_why_it_cannot(tmp_path: Path) -> None:
    """SQLite keeps a view whose table was dropped; describing it failed the call with no reason given, and the
    server logged a traceback."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("CREATE TABLE gone (x); CREATE VIEW broken AS SELECT x FROM gone; DROP TABLE gone;")
    async with server_for(path) as (server, _), Client(server) as client:
        described = await client.call_tool("describe_table", {"name": "broken"})
        listed = await client.call_tool("list_tables", {})

    assert described.is_error
    assert "no such table: main.gone" in described.content[0].text  # type: ignore[union-attr]
    assert not listed.is_error
    assert listed.structured_content == {"tables": [{"name": "broken", "type": "view"}]}
