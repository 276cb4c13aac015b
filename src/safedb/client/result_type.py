"""A transport wrapper for two things servers send that the SDK refuses whole, although only part is amiss.

- A 2026-07-28 result without `resultType` is a complete result (SEP-2322): the spec says so, `mcp` 2.3
  refuses it. The wrapper fills in the default ("complete") on responses, once a 2026-07-28 era is negotiated.
- A tool list with one tool not in MCP's form (an input schema that is not a schema): the SDK refuses the whole
  list, and with it every call's result (it checks each against the list). The wrapper leaves that tool out,
  with a warning, so that the server's other tools can be used.

It also turns a message the SDK cannot read at all (JSON nested deeper than its parser goes) that carries an `id`
into one it can: a reply becomes an error reply, so that the call it answers ends instead of waiting for good; a
request becomes the same request without its parameters, which the SDK refuses with an error reply, so that the
server does not wait for good either.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mcp.client import Transport
from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId, Tool
from mcp_types.methods import validate_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

if TYPE_CHECKING:  # a private module of the SDK: for the type checker only, so a rename cannot break a run
    from mcp.shared._stream_protocols import ReadStream

logger = logging.getLogger(__name__)

Item = SessionMessage | Exception


class DefaultResultType:
    """Wraps a transport; `version()` is the protocol version negotiated (None while connecting), `server` names the
    server in warnings."""

    def __init__(self, transport: Transport, version: Callable[[], str | None], server: str) -> None:
        self._transport = transport
        self._version = version
        self._server = server

    async def __aenter__(self) -> Any:
        read, write = await self._transport.__aenter__()
        return _Reader(read, self._version, self._server), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        return await self._transport.__aexit__(exc_type, exc, traceback)


class _Reader:
    def __init__(self, inner: ReadStream[Item], version: Callable[[], str | None], server: str) -> None:
        self._inner = inner
        self._version = version
        self._server = server
        self._left_out: set[tuple[Any, str]] = set()

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        return self._fill(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        return self._fill(await self._inner.__anext__())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None

    def _fill(self, item: Item) -> Item:
        if isinstance(item, ValidationError) and (readable := self._readable_stand_in(item)) is not None:
            return readable
        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
            result, version = item.message.result, self._version()
            if isinstance(result, dict) and "resultType" not in result and version in MODERN_PROTOCOL_VERSIONS:
                result["resultType"] = "complete"
            if isinstance(result, dict) and isinstance(result.get("tools"), list) and "content" not in result:
                result["tools"] = [tool for tool in result["tools"] if self._readable_tool(result, tool, version)]
        return item

    def _readable_stand_in(self, error: ValidationError) -> SessionMessage | None:
        """What to read in place of a message the SDK could not read, when it has an `id` (see the module)."""
        if (found := _message_id(error)) is None:
            return None
        message, identifier = found
        problem = first_problem(error)
        method = message.get("method")
        logger.warning("%s sent a message SafeDB cannot read (%s): answered as an error", self._server, problem)
        if isinstance(method, str):
            return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=identifier, method=method))
        unreadable = ErrorData(code=PARSE_ERROR, message=f"{self._server} sent a reply SafeDB cannot read ({problem})")
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=identifier, error=unreadable))

    def _readable_tool(self, listing: dict[str, Any], tool: Any, version: str | None) -> bool:
        """Whether the SDK reads `tool` in a tool list, as it reads a list: for the version negotiated, then as a
        `Tool`. (A list has "tools" and no "content", which every tool call's result has.)"""
        try:
            validate_server_result("tools/list", version or "2025-11-25", {**listing, "tools": [tool]})
            Tool.model_validate(tool, by_name=False)
        except ValidationError as error:
            name = tool.get("name") if isinstance(tool, dict) else None
            problem = first_problem(error)
            if (name, problem) not in self._left_out:  # said once: the SDK lists tools again for each call's result
                self._left_out.add((name, problem))
                logger.warning("Leaving out tool %r of %s, not in MCP's form (%s)", name, self._server, problem)
            return False
        return True


def _message_id(error: ValidationError) -> tuple[dict[str, Any], RequestId] | None:
    """The JSON object the SDK could not read, and its `id`; None when it has none, or is not JSON at all."""
    details = error.errors(include_url=False)
    raw = details[0]["input"] if details else None
    if not isinstance(raw, str | bytes):
        return None
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    identifier = message.get("id") if isinstance(message, dict) else None
    if isinstance(identifier, bool) or not isinstance(identifier, int | str):
        return None
    return message, identifier


def first_problem(error: ValidationError) -> str:
    """Where the first thing pydantic refused is, and why, in one line."""
    details = error.errors(include_url=False)
    if not details:
        return str(error)
    where = ".".join(str(step) for step in details[0]["loc"])
    return f"{where}: {details[0]['msg']}" if where else str(details[0]["msg"])
