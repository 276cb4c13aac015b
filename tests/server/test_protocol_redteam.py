"""Red team at the protocol level: raw JSON-RPC over HTTP against a real `safedb serve`, as a hostile or merely
unusual client would speak it, beyond what the SDK clients send."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from tests.helpers import safedb_serve

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HANDSHAKE_VERSION = "2025-11-25"


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
