"""How many handshake-era HTTP sessions the server keeps, and for how long idle: set in the configuration file.
Found by the red team: with the SDK's limits (10,000 sessions, idle for 30 minutes) a flood of `initialize`
requests held some 40 KB per session and locked out new clients for half an hour, with nothing to tune.

Real clients (the SDK's) against `safedb serve` with a configuration file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import ServerProcess, serving_process

pytestmark = pytest.mark.anyio


def innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "app.db").touch()
    config = tmp_path / "safedb.toml"
    config.write_text(
        '[server]\naudit_db = "audit.db"\nmax_sessions = 2\nsession_idle_timeout = 1.5\n\n'
        '[targets.app]\ndatabase = "app.db"\n',
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "safedb", "serve", "--config", str(config), "--port", "0"]
    with serving_process(command, env={"SAFEDB_DATA_DIR": str(tmp_path / "data")}) as server:
        yield server


async def test_sessions_past_the_configured_number_are_refused(served: ServerProcess) -> None:
    async with AsyncExitStack() as open_sessions:
        for _ in range(2):
            client = await open_sessions.enter_async_context(Client(served.url, mode="legacy"))
            assert not (await client.call_tool("execute_query", {"query": "SELECT 1"})).is_error
        with pytest.raises((MCPError, BaseExceptionGroup)) as refused:
            async with Client(served.url, mode="legacy"):
                pass
        assert "Too many open sessions" in str(innermost(refused.value))
        async with Client(served.url, mode="auto") as modern:  # 2026-07-28 opens no session
            assert not (await modern.call_tool("execute_query", {"query": "SELECT 1"})).is_error


async def test_an_idle_session_is_closed_after_the_configured_time(served: ServerProcess) -> None:
    """A session with no request in flight (a flood's `initialize`, with no stream kept open) is closed once idle
    for the configured time, and no longer counts."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with httpx2.AsyncClient(timeout=10) as http:
        opened = [await http.post(served.url, json=initialize, headers=headers) for _ in range(2)]
        sessions = [{**headers, "mcp-session-id": response.headers["mcp-session-id"]} for response in opened]
        assert [(await http.post(served.url, json=ping, headers=s)).status_code for s in sessions] == [200, 200]
        await anyio.sleep(3.5)
        assert [(await http.post(served.url, json=ping, headers=s)).status_code for s in sessions] == [404, 404]
    async with Client(served.url, mode="legacy") as client:  # the closed sessions no longer count
        assert not (await client.call_tool("execute_query", {"query": "SELECT 1"})).is_error
