"""A 2026-07-28 result without `resultType` is a complete result (SEP-2322): the spec says so, the SDK does not.

`mcp` 2.3 refuses a 2026-07-28 tool result that leaves `resultType` out. This transport wrapper fills
in the default ("complete") on responses, and only once a 2026-07-28 era is negotiated, so that such a
server's results are read as the specification says.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mcp.client import Transport
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse

if TYPE_CHECKING:  # a private module of the SDK: for the type checker only, so a rename cannot break a run
    from mcp.shared._stream_protocols import ReadStream

Item = SessionMessage | Exception


class DefaultResultType:
    """Wraps a transport; `modern()` tells whether the connection speaks 2026-07-28 yet."""

    def __init__(self, transport: Transport, modern: Callable[[], bool]) -> None:
        self._transport = transport
        self._modern = modern

    async def __aenter__(self) -> Any:
        read, write = await self._transport.__aenter__()
        return _Reader(read, self._modern), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        return await self._transport.__aexit__(exc_type, exc, traceback)


class _Reader:
    def __init__(self, inner: ReadStream[Item], modern: Callable[[], bool]) -> None:
        self._inner = inner
        self._modern = modern

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
        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse) and self._modern():
            result = item.message.result
            if isinstance(result, dict) and "resultType" not in result:
                result["resultType"] = "complete"
        return item
