"""`WithoutResumption` adds no coroutine of its own to a request: a handshake-era call waiting in elicitation
holds its HTTP request open for as long as a person takes, and every frame it holds counts thousands of times
over (docs/benchmarks.md, the handshake era's memory per waiting call). Over HTTP it is tested end to end in
test_protocol_redteam.py."""

from __future__ import annotations

from typing import Any

import pytest

from safedb.server.resumption import WithoutResumption

pytestmark = pytest.mark.anyio


class RecordingApp:
    """An ASGI app that remembers the scope it was called with and the coroutine it returned."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []
        self.coroutines: list[object] = []

    def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        async def run() -> None:
            self.scopes.append(scope)

        coroutine = run()
        self.coroutines.append(coroutine)
        return coroutine


async def receive() -> dict[str, Any]:
    return {"type": "http.request"}


async def send(message: dict[str, Any]) -> None:
    pass


def scope(method: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/mcp", "headers": headers}


async def test_the_request_runs_as_the_wrapped_apps_own_coroutine() -> None:
    inner = RecordingApp()
    awaitable = WithoutResumption(inner)(scope("POST", []), receive, send)
    assert awaitable is inner.coroutines[0]
    await awaitable
    assert inner.scopes == [scope("POST", [])]


async def test_a_get_loses_only_its_last_event_id() -> None:
    inner = RecordingApp()
    headers = [(b"accept", b"text/event-stream"), (b"last-event-id", b"0"), (b"mcp-session-id", b"abc")]
    await WithoutResumption(inner)(scope("GET", headers), receive, send)
    assert inner.scopes[0]["headers"] == [(b"accept", b"text/event-stream"), (b"mcp-session-id", b"abc")]
