"""One connection to an MCP server, with elicitations routed to an answerer one at a time.

The SDK's defaults are raised where they would cut a normal session short: a 2026-07-28 call may need
many input rounds while a person decides, an approval may take long on a quiet stream, and a normal
result set can exceed 1 MiB in one SSE event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    SERVER_INFO_META_KEY,
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    ElicitationRequiredErrorData,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    LoggingLevel,
    LoggingMessageNotificationParams,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from safedb import __version__
from safedb.client.queue import ElicitationQueue
from safedb.client.requests import Answerer, ElicitationRequest, Era, ServerIdentity
from safedb.client.result_type import DefaultResultType, first_problem
from safedb.client.server_stderr import stdio_transport, write_to_stderr
from safedb.client.targets import HttpTarget, Target

logger = logging.getLogger(__name__)
server_log = logging.getLogger("safedb.client.server_log")
"""Where the log messages servers send go, each at its level (the commands show warnings and above)."""

INPUT_REQUIRED_MAX_ROUNDS = 1000
"""Input rounds one 2026-07-28 call may take (the SDK stops at 10)."""
MAX_SSE_EVENT_BYTES = 256 * 1024 * 1024
"""Largest single SSE event accepted (the SDK stops at 1 MiB)."""
STREAM_READ_TIMEOUT = 24 * 3600.0
"""Seconds a response stream may stay quiet, e.g. while a person takes their time to approve."""
REQUEST_TIMEOUT = 30.0
"""Seconds to wait for the answer to anything but a tool call (the handshake, the tool list): a server that takes
the connection but never answers is reported, not waited for until STREAM_READ_TIMEOUT."""
SESSION_END_TIMEOUT = 5.0
"""Seconds to wait for the server to answer the DELETE that ends an HTTP session, as the client leaves."""
URL_COMPLETION_TIMEOUT = 900.0
"""Seconds to wait for a URL-mode completion notification before retrying a call anyway."""

SERVER_LOG_LEVEL: LoggingLevel = "warning"
"""The least severe log messages a 2026-07-28 server is asked to send (it sends none unless asked)."""
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_LOG_MESSAGE_CHARACTERS = 1000

ERA_MODES = {"auto": "auto", "handshake": "legacy", "2026-07-28": "auto"}
"""SDK connect modes. 2026-07-28 probes too (rather than adopting the version blindly), so that the server's
name is known; a server that only speaks the handshake era is then refused."""


_SDK_LOST_CONNECTION = ("Connection closed", "SSE stream")
"""How the SDK's errors for a server that is gone (or a call's stream with it) begin. Their code, CONNECTION_CLOSED
(-32000), is also the first of JSON-RPC's codes for a server's own errors, which servers answer calls with."""


class EraUnavailable(RuntimeError):
    """The server does not speak the protocol era that was asked for."""


class MalformedReply(ValueError):
    """The server answered in a form MCP does not allow (such as a tool whose input schema is not a schema)."""


def connection_lost(error: MCPError) -> bool:
    """Whether an error says the server is gone, rather than being the server's answer to a request."""
    return error.code == CONNECTION_CLOSED and error.data is None and error.message.startswith(_SDK_LOST_CONNECTION)


class Connection:
    """A connected MCP client. Use `connect(...)` to open one."""

    def __init__(self, target: Target, answerer: Answerer) -> None:
        self.target = target
        self._queue = ElicitationQueue(answerer)
        self._answerer = answerer
        self._client: Client | None = None
        self._running_tools: list[str] = []
        self._completed: dict[str, anyio.Event] = {}
        self.completions: list[str] = []
        """Elicitation ids the server reported complete (URL mode, handshake era)."""
        self.session_ended = False
        """The HTTP server answered a request of this session with 404: it no longer knows the session (it restarted,
        or closed it after a while idle), and a new connection needs a new one (`CommandOutcome.reconnect`)."""

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RuntimeError("not connected")
        return self._client

    @property
    def server(self) -> ServerIdentity:
        return ServerIdentity(self._server_name(), self.target.describe())

    def _server_name(self) -> str | None:
        if self._client is None:
            return None
        info = self._client.server_info
        if info is not None:
            return info.name
        # The SDK drops a 2026-07-28 serverInfo stamp it finds malformed (e.g. an empty version); the name is
        # still worth showing.
        discovered = self._client.session.discover_result
        stamp = (discovered.meta or {}).get(SERVER_INFO_META_KEY) if discovered is not None else None
        name = stamp.get("name") if isinstance(stamp, dict) else None
        return name if isinstance(name, str) and name else None

    def negotiated_version(self) -> str | None:
        """The protocol version the connection has negotiated (None while still connecting)."""
        return self._client.session.protocol_version if self._client is not None else None

    @property
    def era(self) -> Era:
        return Era.INPUT_REQUIRED if self.client.protocol_version in MODERN_PROTOCOL_VERSIONS else Era.HANDSHAKE

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists. MalformedReply when the list is not in MCP's form."""
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            try:
                page = await self.client.list_tools(cursor=cursor)
            except ValidationError as exc:
                raise self._malformed(exc) from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call a tool; elicitations it raises go to the answerer. A handshake-era "URL elicitation required"
        error is answered too, and the call retried once the server reports the pages complete.

        MalformedReply when the result, or the tool list the SDK checks it against, is not in MCP's form.
        """
        self._running_tools.append(name)
        try:
            try:
                return await self.client.call_tool(name, arguments, read_timeout_seconds=STREAM_READ_TIMEOUT)
            except MCPError as exc:
                if connection_lost(exc):
                    # The server is gone, so a question still being asked cannot be answered; on a terminal its
                    # prompt would also fight whatever asks next for the keyboard.
                    await self._queue.withdraw_all()
                if exc.code != URL_ELICITATION_REQUIRED or not await self._complete_required_urls(exc):
                    raise
            return await self.client.call_tool(name, arguments, read_timeout_seconds=STREAM_READ_TIMEOUT)
        except ValidationError as exc:  # the first call's result or, after the pages, the retry's
            raise self._malformed(exc) from None
        finally:
            self._running_tools.remove(name)

    async def note_session_end(self, response: httpx2.Response) -> None:
        if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            self.session_ended = True

    def _malformed(self, error: ValidationError) -> MalformedReply:
        server, problem = self.target.describe(), first_problem(error)
        if error.title == "ListToolsResult":
            # The SDK lists the tools again to check a call's result against the tool's output schema, if any.
            return MalformedReply(f"{server} lists its tools in a form MCP does not allow ({problem})")
        return MalformedReply(f"{server} answered in a form MCP does not allow ({problem})")

    async def elicitation_callback(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        tool = self._running_tools[0] if len(set(self._running_tools)) == 1 else None
        return await self._queue.answer(ElicitationRequest(self.server, params, self.era, tool))

    async def message_handler(self, message: IncomingMessage) -> None:
        if isinstance(message, ValidationError):
            # Something the SDK could not read as JSON-RPC, such as a banner a stdio server printed on stdout.
            # The session goes on without it.
            logger.warning(
                "%s sent something that is not an MCP message (ignored): %s",
                self.target.describe(),
                _what_was_sent(message),
            )
        elif isinstance(message, Exception):
            logger.warning("Transport error from %s: %s", self.target.describe(), message)
        elif isinstance(message, ElicitCompleteNotification):
            elicitation_id = message.params.elicitation_id
            logger.info("The server reports URL elicitation %s complete", elicitation_id)
            self.completions.append(elicitation_id)
            self._completed.setdefault(elicitation_id, anyio.Event()).set()

    async def log_from_server(self, params: LoggingMessageNotificationParams) -> None:
        """A log message from the server, recorded on `server_log` at its level (a server's warnings and errors
        say why a call went wrong; the SDK would drop them)."""
        text = params.data if isinstance(params.data, str) else json.dumps(params.data, ensure_ascii=False)
        if len(text) > _LOG_MESSAGE_CHARACTERS:
            text = text[: _LOG_MESSAGE_CHARACTERS - 3] + "..."
        source = self.target.describe() + (f" ({params.logger})" if params.logger else "")
        level = _LOG_LEVELS.get(params.level, logging.WARNING)
        self._queue.show_when_no_question(lambda: server_log.log(level, "%s logs: %s", source, text))

    def show_server_line(self, line: str) -> None:
        """A line of a stdio server's stderr, on the client's own, once no question is open."""
        self._queue.show_when_no_question(lambda: write_to_stderr(line))

    async def _complete_required_urls(self, error: MCPError) -> bool:
        try:
            required = ElicitationRequiredErrorData.model_validate(error.error.data)
        except ValidationError:
            return False
        for params in required.elicitations:
            result = await self.elicitation_callback(
                ClientRequestContext(session=self.client.session, request_id="url-required"), params
            )
            if result.action != "accept":
                return False
        ids = [params.elicitation_id for params in required.elicitations if params.elicitation_id]
        with anyio.move_on_after(URL_COMPLETION_TIMEOUT):
            for elicitation_id in ids:
                await self._completed.setdefault(elicitation_id, anyio.Event()).wait()
        return True


def _what_was_sent(error: ValidationError) -> str:
    details = error.errors(include_url=False)
    shown = repr(details[0]["input"]) if details else str(error)
    return shown if len(shown) <= 100 else shown[:97] + "..."


async def _bound_session_end(request: httpx2.Request) -> None:
    # The SDK sends the DELETE that ends a session as the client leaves: a server that never answers it must not
    # keep the client from exiting (after it printed its result) for as long as a tool call's stream may be quiet.
    if request.method == "DELETE":
        request.extensions["timeout"] = httpx2.Timeout(SESSION_END_TIMEOUT).as_dict()


@asynccontextmanager
async def connect(target: Target, answerer: Answerer, era: str = "auto") -> AsyncIterator[Connection]:
    """Connect to the target (era: auto, handshake or 2026-07-28) and yield the connection."""
    connection = Connection(target, answerer)
    async with AsyncExitStack() as stack:
        if isinstance(target, HttpTarget):
            http = httpx2.AsyncClient(
                headers=dict(target.headers),
                timeout=httpx2.Timeout(30.0, read=STREAM_READ_TIMEOUT),
                event_hooks={"request": [_bound_session_end], "response": [connection.note_session_end]},
            )
            await stack.enter_async_context(http)
            transport: Any = streamable_http_client(
                target.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES
            )
        else:
            parameters = StdioServerParameters(
                command=target.command,
                args=list(target.args),
                env=dict(target.env or {}) or None,
                cwd=target.cwd,
                # A byte that is not UTF-8 ended the reading of the server's stdout for good ("strict"), and the
                # session hung; replaced, its line is reported as not an MCP message and the session goes on.
                encoding_error_handler="replace",
            )
            # Its stderr cleaned, as all server text, and held back while a question is open.
            transport = stdio_transport(parameters, connection.show_server_line)
        client = Client(
            DefaultResultType(transport, connection.negotiated_version, target.describe()),
            mode=ERA_MODES[era],
            elicitation_callback=connection.elicitation_callback,
            message_handler=connection.message_handler,
            logging_callback=connection.log_from_server,
            log_level=SERVER_LOG_LEVEL,
            input_required_max_rounds=INPUT_REQUIRED_MAX_ROUNDS,
            read_timeout_seconds=REQUEST_TIMEOUT,
            client_info=Implementation(name="safedb-client", version=__version__),
        )
        connection._client = await stack.enter_async_context(client)
        if era == "2026-07-28" and connection.era is not Era.INPUT_REQUIRED:
            raise EraUnavailable(f"{target.describe()} does not speak protocol 2026-07-28")
        yield connection
