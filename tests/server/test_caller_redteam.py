"""Who the audit log says asked: found by red-teaming the protocol. A 2026-07-28 request's `mcp-session-id` header,
which nothing checks in that era, named the caller's session in the log; a client's name of a megabyte was stored
whole on every record of its calls.

Real clients over HTTP against `safedb serve`; the audit log is read from its file.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.server.auditing import CALLER_CHARACTERS
from tests.helpers import Responder, ServerProcess, scratch_table

pytestmark = pytest.mark.anyio


def callers(database: Path) -> list[str | None]:
    with SqliteAuditStore.open(database.parent / "audit.db", readonly=True) as audit:
        return [record.caller for record in audit.records(AuditQuery(limit=None))]


async def test_a_session_header_on_2026_07_28_does_not_name_the_caller(own_server: tuple[ServerProcess, Path]) -> None:
    server, database = own_server
    table = scratch_table(database)
    async with httpx2.AsyncClient(headers={"mcp-session-id": "alice-laptop"}) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="auto", elicitation_callback=Responder(action="decline")) as client:
            assert client.protocol_version == "2026-07-28"
            await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    recorded = callers(database)
    assert recorded
    assert all(caller is not None and "alice-laptop" not in caller for caller in recorded), recorded


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_huge_client_name_is_cut_short_in_the_log(own_server: tuple[ServerProcess, Path], mode: str) -> None:
    server, database = own_server
    table = scratch_table(database)
    info = Implementation(name="x" * 100_000, version="1.0")
    responder = Responder(action="decline")
    async with Client(server.url, mode=mode, elicitation_callback=responder, client_info=info) as client:
        await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    recorded = callers(database)
    assert recorded
    for caller in recorded:
        assert caller is not None
        assert caller.startswith("x" * CALLER_CHARACTERS + "... (100,004 characters)")
        assert len(caller) < CALLER_CHARACTERS + 100
