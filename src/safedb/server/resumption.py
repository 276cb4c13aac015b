"""SafeDB does not resume SSE streams: a request to resume one opens a fresh stream instead of failing.

A client that lost a stream may reconnect with `GET /mcp` and a `Last-Event-ID` header. The SDK
(`mcp.server.streamable_http`) replays only from an event store, and without one it returned no response at
all, which uvicorn answered with a 500 and an ERROR line. SafeDB keeps no event store (an elicitation replayed
after it was answered would only confuse a client) and so sends no event ids; a `Last-Event-ID` can only be
made up, and there is nothing to resume. The header is dropped, and the GET opens the session's stream as usual.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Receive, Scope, Send

_LAST_EVENT_ID = b"last-event-id"


class WithoutResumption:
    """ASGI middleware: GET requests to the MCP endpoint lose their `Last-Event-ID` header."""

    def __init__(self, app: ASGIApp, mcp_path: str = "/mcp") -> None:
        self._app = app
        self._mcp_path = mcp_path

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """The wrapped app's own awaitable, not a coroutine of this middleware's around it: a request held open
        (a call waiting in elicitation) would hold that coroutine's frame too, for as long as a person takes.
        Not a coroutine function, so the ASGI server must be told the interface (`interface="asgi3"`)."""
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == self._mcp_path:
            headers = [(name, value) for name, value in scope["headers"] if name != _LAST_EVENT_ID]
            scope = {**scope, "headers": headers}
        return self._app(scope, receive, send)
