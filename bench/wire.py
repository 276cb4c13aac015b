"""A lean MCP-over-HTTP/1.1 client: pre-built JSON-RPC POST bodies on keep-alive connections to /mcp.

Cheap enough per request that the server, not the client, is what a benchmark measures: no HTTP
library, no JSON-RPC session machinery, no model validation. Responses are parsed only as far as the
caller needs: status, a few headers, and the JSON-RPC messages of a JSON body or an SSE stream (as
bytes, decoded by the caller only when it needs a field).

Two ways to speak MCP:

- `ModernCaller` (2026-07-28): every request is self-contained, with the `MCP-Protocol-Version`,
  `Mcp-Method` and `Mcp-Name` headers and the `_meta` envelope (protocol version, client
  capabilities, client info) the SDK's streamable HTTP server checks.
- `HandshakeSession` (2025-11-25): `initialize` + `notifications/initialized`, then every request
  carries `Mcp-Session-Id` and `MCP-Protocol-Version`; a `tools/call` answers on an SSE stream, on
  which the server may send `elicitation/create` first; the answer is POSTed back on another connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "safedb-bench", "version": "1"}
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}
ACCEPT_ANSWER = {"confirm": True, "justification": "benchmark round trip", "environment": "Development"}


class WireError(Exception):
    """The server answered something this client did not expect."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    messages: list[bytes] = field(default_factory=list)
    """The JSON-RPC messages of the body (one for a JSON body, one per SSE event otherwise)."""
    size: int = 0
    """Bytes of the response, headers included, as they arrived."""
    result_at: float = 0.0
    """`time.perf_counter()` when the JSON-RPC response arrived (an SSE stream may end a little later)."""

    def json(self, index: int = -1) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.messages[index])
        return message


class Connection:
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: bytes) -> None:
        self._reader = reader
        self._writer = writer
        self._host = host

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        return cls(reader, writer, f"{host}:{port}".encode())

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    def send(self, body: bytes, headers: bytes = b"", method: bytes = b"POST") -> None:
        """Write one request; `headers` are extra `Name: value\\r\\n` lines."""
        self._writer.write(
            b"%s /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s"
            % (method, self._host, headers, len(body), body)
        )

    async def request(self, body: bytes, headers: bytes = b"", method: bytes = b"POST") -> Response:
        """Send a request and read its whole response."""
        self.send(body, headers, method)
        response = await self.read_head()
        async for message in self.read_messages(response):
            response.messages.append(message)
            if not is_server_message(message):
                response.result_at = time.perf_counter()
        return response

    async def read_head(self) -> Response:
        head = await self._reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(b":")
                headers[name.strip().lower().decode()] = value.strip().decode()
        return Response(status, headers, size=len(head))

    async def read_messages(self, response: Response) -> AsyncIterator[bytes]:
        """The JSON-RPC messages of the response body, as they arrive (SSE events one by one)."""
        if response.headers.get("transfer-encoding") == "chunked":
            sse = response.headers.get("content-type", "").startswith("text/event-stream")
            buffer = b""
            while True:
                size_line = await self._reader.readuntil(b"\r\n")
                size = int(size_line.split(b";", 1)[0], 16)
                response.size += len(size_line) + size + 2
                if size == 0:
                    await self._reader.readuntil(b"\r\n")
                    break
                buffer += (await self._reader.readexactly(size + 2))[:-2]
                if sse:
                    events, buffer = _split_events(buffer)
                    for event in events:
                        yield event
            if buffer and not sse:
                yield buffer
            return
        length = int(response.headers.get("content-length", "0"))
        body = await self._reader.readexactly(length) if length else b""
        response.size += length
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            events, _ = _split_events(body + b"\n\n")
            for event in events:
                yield event
        elif body:
            yield body


def _split_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete SSE events' data out of `buffer`, and the incomplete rest."""
    buffer = buffer.replace(b"\r\n", b"\n")
    *complete, rest = buffer.split(b"\n\n")
    events = []
    for block in complete:
        data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            events.append(b"\n".join(data))
    return events, rest


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _result_of(message: dict[str, Any]) -> dict[str, Any]:
    if "error" in message:
        raise WireError(f"JSON-RPC error: {message['error']}")
    result: dict[str, Any] = message["result"]
    return result


def is_server_message(message: bytes) -> bool:
    """True for a request or notification from the server, False for the response to our request."""
    return b'"method"' in message[:48]


def tool_call_ok(message: bytes) -> bool:
    """True when a final tools/call response is a success (checked on the bytes, without parsing)."""
    return b'"result"' in message and b'"isError":true' not in message


class ModernCaller:
    """Stateless 2026-07-28 `tools/call` requests with pre-built headers and `_meta` envelope."""

    def __init__(self, tool: str = "execute_query") -> None:
        self.tool = tool
        self.headers = b"MCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: %s\r\n" % (
            MODERN_VERSION.encode(),
            tool.encode(),
        )
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
        }
        self._meta = _json(meta)

    def body(self, request_id: int, query: str, extra: dict[str, Any] | None = None) -> bytes:
        params = b'{"name":%s,"arguments":%s,%s"_meta":%s}' % (
            _json(self.tool),
            _json({"query": query}),
            b"".join(b"%s:%s," % (_json(key), _json(value)) for key, value in (extra or {}).items()),
            self._meta,
        )
        return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (request_id, params)

    def prebuilt(self, query: str) -> Callable[[int], bytes]:
        """A fast body builder for one fixed query: only the id changes."""
        template = self.body(0, query)
        prefix, suffix = template.split(b'"id":0', 1)
        return lambda request_id: b'%s"id":%d%s' % (prefix, request_id, suffix)

    async def call(self, connection: Connection, request_id: int, query: str) -> Response:
        return await connection.request(self.body(request_id, query), self.headers)

    async def round_trip(self, connection: Connection, request_id: int, query: str) -> tuple[Response, int]:
        """Call, answer every input request with an accepting answer, retry; the final response and rounds."""
        response = await self.call(connection, request_id, query)
        rounds = 1
        while True:
            result = _result_of(response.json())
            if result.get("resultType") != "input_required":
                return response, rounds
            response = await self.answer(connection, request_id, query, result)
            rounds += 1
            if rounds > 5:
                raise WireError("more than 5 input-required rounds")

    async def answer(
        self, connection: Connection, request_id: int, query: str, input_required: dict[str, Any]
    ) -> Response:
        """Retry a call whose result was `input_required`, accepting every question."""
        extra = {"inputResponses": accept_all(input_required["inputRequests"])}
        if "requestState" in input_required:
            extra["requestState"] = input_required["requestState"]
        return await connection.request(self.body(request_id, query, extra), self.headers)


def accept_all(input_requests: dict[str, Any]) -> dict[str, Any]:
    responses = {}
    for key, request in input_requests.items():
        if request.get("method") != "elicitation/create":
            raise WireError(f"unexpected input request {request.get('method')}")
        responses[key] = {"action": "accept", "content": ACCEPT_ANSWER}
    return responses


class HandshakeSession:
    """One 2025-11-25 session: its id, its headers, and the JSON-RPC ids it has used."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.headers = b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n" % (
            session_id.encode(),
            HANDSHAKE_VERSION.encode(),
        )
        self.next_id = 1

    @classmethod
    async def open(cls, connection: Connection) -> HandshakeSession:
        """`initialize` + `notifications/initialized` on `connection`."""
        params = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}
        body = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":%s}' % _json(params)
        response = await connection.request(body)
        session_id = response.headers.get("mcp-session-id")
        if response.status != 200 or session_id is None:
            raise WireError(f"initialize failed: HTTP {response.status}")
        _result_of(response.json())
        session = cls(session_id)
        notified = await connection.request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', session.headers)
        if notified.status != 202:
            raise WireError(f"notifications/initialized: HTTP {notified.status}")
        return session

    def call_body(self, query: str, tool: str = "execute_query") -> bytes:
        request_id = self.next_id
        self.next_id += 1
        params = b'{"name":%s,"arguments":%s}' % (_json(tool), _json({"query": query}))
        return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (request_id, params)

    async def call(self, connection: Connection, query: str) -> Response:
        """A tools/call that needs no answer from the client; its final response."""
        return await connection.request(self.call_body(query), self.headers)

    async def start_call(self, connection: Connection, query: str) -> Response:
        """Send a tools/call and read the response head; read its messages with `Connection.read_messages`."""
        connection.send(self.call_body(query), self.headers)
        return await connection.read_head()

    async def answer(self, connection: Connection, elicitation: dict[str, Any]) -> None:
        """POST an accepting answer to an `elicitation/create` request of this session."""
        body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (
            _json(elicitation["id"]),
            _json({"action": "accept", "content": ACCEPT_ANSWER}),
        )
        response = await connection.request(body, self.headers)
        if response.status != 202:
            raise WireError(f"elicitation answer: HTTP {response.status}")

    async def close(self, connection: Connection) -> None:
        await connection.request(b"", self.headers, method=b"DELETE")


class PendingCall:
    """A handshake-era tools/call whose SSE stream is open, read up to the server's `elicitation/create`."""

    def __init__(self, session: HandshakeSession, connection: Connection, response: Response) -> None:
        self.session = session
        self.connection = connection
        self.response = response
        self._messages = connection.read_messages(response)

    @classmethod
    async def start(cls, session: HandshakeSession, connection: Connection, query: str) -> PendingCall:
        return cls(session, connection, await session.start_call(connection, query))

    async def next_message(self) -> dict[str, Any]:
        try:
            raw = await anext(self._messages)
        except StopAsyncIteration:
            raise WireError("the stream ended early") from None
        message: dict[str, Any] = json.loads(raw)
        return message

    async def until_elicitation(self) -> dict[str, Any]:
        """Read the stream until the server asks; the `elicitation/create` request."""
        while True:
            message = await self.next_message()
            if message.get("method") == "elicitation/create":
                return message
            if "result" in message or "error" in message:
                raise WireError(f"the call finished without asking: {str(message)[:200]}")

    async def until_result(self) -> bytes:
        """Read the rest of the stream; the final response's bytes."""
        final = b""
        async for raw in self._messages:
            if not is_server_message(raw):
                final = raw
                self.response.result_at = time.perf_counter()
        if not final:
            raise WireError("the stream ended without a result")
        return final
