"""Red team at the protocol level: raw JSON-RPC over HTTP against a real `safedb serve`, as a hostile or merely
unusual client would speak it, beyond what the SDK clients send."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx2
import pytest

from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.db.demo import ensure_demo_database
from tests.helpers import rows, safedb_serve

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HANDSHAKE_VERSION = "2025-11-25"
STATELESS_VERSION = "2026-07-28"
ACCEPTED = {"confirm": True, "justification": "cleanup of test rows", "environment": "Development"}


async def open_session(http: httpx2.AsyncClient, url: str) -> None:
    """A handshake-era session of an elicitation-capable client; later requests on `http` carry its id."""
    hello = {
        "protocolVersion": HANDSHAKE_VERSION,
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    opened = await http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    assert opened.status_code == 200, opened.text
    http.headers.update({"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": HANDSHAKE_VERSION})
    assert (await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})).status_code == 202


async def call_stateless(http: httpx2.AsyncClient, url: str, arguments: dict[str, Any], **params: Any) -> Any:
    """One 2026-07-28 `tools/call` of execute_query (extra `params` such as requestState, inputResponses), as
    an elicitation-capable client; the JSON-RPC result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    call = {"name": "execute_query", "arguments": arguments, "_meta": meta, **params}
    headers = {"MCP-Protocol-Version": STATELESS_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "execute_query"}
    answered = await http.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers=headers
    )
    assert answered.status_code == 200, answered.text
    return answered.json()["result"]


async def accept_stateless(http: httpx2.AsyncClient, asked_at: str, answered_at: str, query: str, content: Any) -> Any:
    """Call execute_query with `query` at the server `asked_at`, and accept its question with `content` at
    `answered_at` (the same server, or another); the second call's JSON-RPC result."""
    asked = await call_stateless(http, asked_at, {"query": query})
    answer = {"safedb_approval": {"action": "accept", "content": content}}
    state = asked["requestState"]
    return await call_stateless(http, answered_at, {"query": query}, requestState=state, inputResponses=answer)


def audit_decisions(audit_db: Path) -> list[str]:
    with SqliteAuditStore.open(audit_db, readonly=True) as audit:
        return [str(record.decision) for record in audit.records(AuditQuery(limit=None))]


async def test_a_production_justification_of_marks_that_show_nothing_does_not_count(demo_db: Path) -> None:
    """A Production change needs a justification of ten characters a person can read. Ten variation selectors
    (U+FE0F), which render as nothing, counted as ten and the statement ran; combining marks count only with the
    letter they go on."""
    query = "DELETE FROM invoices WHERE id = 7"
    blank = {"confirm": True, "justification": "\ufe0f" * 10, "environment": "Production"}
    with safedb_serve(demo_db) as server:
        async with httpx2.AsyncClient(headers=HEADERS, timeout=30) as http:
            answered = await accept_stateless(http, server.url, server.url, query, blank)
    assert answered["structuredContent"]["status"] == "blocked", answered
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 7") == [(1,)]
    assert audit_decisions(demo_db.parent / "audit.db") == ["requested", "blocked"]


async def test_a_get_stream_asking_to_resume_opens_a_fresh_stream(demo_db: Path) -> None:
    """A GET with `Last-Event-ID` asks to resume a stream. The SDK replays only from an event store, which SafeDB
    does not keep; without one it returned no response at all, which uvicorn turned into a 500 and an ERROR line.
    SafeDB sends no event ids, so there is nothing to resume: the header is ignored and the session's stream opens."""
    with safedb_serve(demo_db) as server:
        async with httpx2.AsyncClient(headers=HEADERS, timeout=30) as http:
            await open_session(http, server.url)
            resume = {"Accept": "text/event-stream", "Last-Event-ID": "0"}
            async with http.stream("GET", server.url, headers=resume) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
    assert not [line for line in server.log if "ASGI callable" in line or "Traceback" in line]


async def test_an_answer_does_not_move_to_another_deployment_sharing_only_the_key(tmp_path: Path) -> None:
    """Two deployments (each its own database and audit log) configured with one request-state key, each serving a
    target of the same name: an answer to the first's question, sent to the second, ran there, on a database the
    person was never shown. The ticket binds the statement and the client, and the SDK the tool's arguments, but
    nothing the database: an answer now counts only for a question the server's own audit log holds, which replicas
    (sharing the log) still pass."""
    shown, other = (ensure_demo_database(tmp_path / name) for name in ("shown", "other"))
    query = "DELETE FROM invoices WHERE id = 3"
    key = ("--request-state-key", secrets.token_urlsafe(48))
    with safedb_serve(shown, *key) as asking, safedb_serve(other, *key) as elsewhere:
        async with httpx2.AsyncClient(headers=HEADERS, timeout=30) as http:
            moved = await accept_stateless(http, asking.url, elsewhere.url, query, ACCEPTED)
    assert moved["isError"]
    assert "no record of asking" in moved["structuredContent"]["message"]
    assert rows(other, "SELECT count(*) FROM invoices WHERE id = 3") == [(1,)]
    assert rows(shown, "SELECT count(*) FROM invoices WHERE id = 3") == [(1,)]
    assert audit_decisions(other.parent / "audit.db") == ["refused"]


@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"url": {}}}], ids=["none", "url-only"])
async def test_a_client_that_cannot_answer_a_form_is_told_so_and_nothing_runs(
    demo_db: Path, capabilities: dict[str, Any]
) -> None:
    """A client that declared URL elicitation only was told it had not declared elicitation at all."""
    query = "DELETE FROM invoices WHERE id = 7"
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    call = {"name": "execute_query", "arguments": {"query": query}, "_meta": meta}
    headers = {"MCP-Protocol-Version": STATELESS_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "execute_query"}
    with safedb_serve(demo_db) as server:
        async with httpx2.AsyncClient(headers=HEADERS, timeout=30) as http:
            answered = await http.post(
                server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers=headers
            )
    result = answered.json()["result"]
    assert result["isError"], result
    assert "This client did not declare form elicitation" in result["content"][0]["text"], result
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 7") == [(1,)]
