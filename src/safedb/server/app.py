"""Build the MCP server around the served databases, and run it over Streamable HTTP or stdio."""

from __future__ import annotations

import gc
import inspect
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp.types import CallToolResult, InputRequiredResult
from mcp_types import ToolAnnotations
from pydantic import ValidationError

from safedb import __version__
from safedb.approval.board import ApprovalBoard
from safedb.audit import AuditStore
from safedb.db.backend import Database
from safedb.server.arguments import argument_error
from safedb.server.elicitation import ApprovalChannel
from safedb.server.rendering import error_result
from safedb.server.resumption import WithoutResumption
from safedb.server.targets import ServedTarget, ServedTargets
from safedb.server.tools import SafeDBTools
from safedb.server.tracing import trace_only_when_set_up
from safedb.server.web_channel import WebApprovalChannel
from safedb.settings import Settings
from safedb.web.routes import approval_routes

logger = logging.getLogger(__name__)

INSTRUCTIONS = """SafeDB gives access to SQL databases (targets). Use list_tables and describe_table to learn the \
schema, and execute_query to run one SQL statement per call. Read-only statements run at once. Statements that \
change anything pause and ask the user for approval; if the user declines, nothing changes. Do not retry a \
declined statement unless the user asks."""

_LATE_ANSWER_GRACE = 300.0

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_MAY_CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


class SafeDBServer(MCPServer):
    """The SDK's server, with tool arguments that do not fit a tool's schema told in plain words."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            schema = next((tool.input_schema for tool in await self.list_tools() if tool.name == name), {})
            # As the tools' own refusals are: an error with `status`, which a script reads (README).
            return error_result(argument_error(name, exc.__cause__, schema))


def build_server(settings: Settings, databases: Mapping[str, Database], audit: AuditStore) -> MCPServer:
    """The MCP server for the settings' targets (`databases` holds each target's open database, by name);
    every decision about a change is recorded in `audit`."""
    targets = ServedTargets({t.name: ServedTarget(t, databases[t.name]) for t in settings.targets})
    # requestState is sealed with the configured keys, so that processes sharing them (and the audit log)
    # can finish each other's rounds; without keys, a key of this process's own. It outlives the approval
    # timeout a little, so that a late answer reaches SafeDB and is recorded as timed out.
    ttl = max(t.policy.approval_timeout for t in settings.targets) + _LATE_ANSWER_GRACE
    security = (
        RequestStateSecurity(keys=list(settings.request_state_keys), ttl=ttl)
        if settings.request_state_keys
        else RequestStateSecurity.ephemeral(ttl=ttl)
    )
    server: MCPServer = SafeDBServer(
        name="SafeDB", instructions=INSTRUCTIONS, version=__version__, request_state_security=security
    )
    trace_only_when_set_up(server)
    board = ApprovalBoard()
    web_channel = WebApprovalChannel(board, settings.public_url, settings.progress_interval)
    tools = SafeDBTools(targets, audit, ApprovalChannel(settings.progress_interval), web_channel, settings.text_rows)
    for route in approval_routes(board, settings.approvers, settings.public_url):
        server.custom_route(route.path, methods=sorted(route.methods or ()))(route.endpoint)
    modes = "Targets and their safety modes: " + "; ".join(t.safety_mode() for t in settings.targets) + "."
    server.add_tool(
        tools.execute_query,
        name="execute_query",
        title="Run SQL (asks before changes)",
        description=f"{inspect.getdoc(tools.execute_query)}\n\n{modes}",
        annotations=_MAY_CHANGE,
    )
    for tool, title in ((tools.list_tables, "List tables"), (tools.describe_table, "Describe a table")):
        description = f"{inspect.getdoc(tool)}\n\nTargets: {', '.join(t.name for t in settings.targets)}."
        server.add_tool(tool, title=title, description=description, annotations=_READ_ONLY)
    return server


async def serve(
    settings: Settings,
    databases: Mapping[str, Database],
    audit: AuditStore,
    listener: socket.socket | None,
    ready: Callable[[], None],
) -> None:
    """Call `ready` and serve until stopped (HTTP on `listener`, or stdio when there is none), then close the
    databases and the audit log, whenever it is stopped after `ready`. Everything runs in this one event loop, which
    owns the databases' connection pools."""
    try:
        server = build_server(settings, databases, audit)
        # What exists now lives as long as the server: keep it out of the garbage collector's full
        # collections, which would otherwise pause the event loop for tens of milliseconds each.
        gc.collect()
        gc.freeze()
        ready()
        if listener is None:
            await serve_stdio(server)
        else:
            await serve_http(server, settings, listener)
    finally:
        for database in databases.values():
            await database.aclose()
        audit.close()


async def serve_http(server: MCPServer, settings: Settings, listener: socket.socket) -> None:
    """Serve Streamable HTTP at /mcp on an already bound socket."""
    app = WithoutResumption(
        server.streamable_http_app(
            host=settings.host,
            max_sessions=settings.max_sessions,
            session_idle_timeout=settings.session_idle_timeout,
        )
    )
    # asgi3: uvicorn would take `WithoutResumption`, whose __call__ is not a coroutine function, for ASGI 2.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", interface="asgi3")
    await uvicorn.Server(config).serve(sockets=[listener])


async def serve_stdio(server: MCPServer) -> None:
    """Serve MCP on stdin/stdout until the client closes them.

    A client that exits or is killed breaks the pipes under the SDK's transport (`mcp.server.stdio.stdio_server`):
    writing the answer (or the SDK's "connection closed" error) to a call cut short raises BrokenPipeError, and
    reading a socket pair (as Node-based hosts use) that the client closed with data unread raises
    ConnectionResetError. The SDK lets either end its task group, which reached the interpreter as a traceback and
    exit status 1. For stdio it is just the end of the session, like the end of input: a call cut short while its
    question waited is already logged in one line and audited as cancelled. Only these two errors, which say the
    client's end is gone, are caught; anything else still ends the server with its traceback.
    """
    try:
        await server.run_stdio_async()
    except* (BrokenPipeError, ConnectionResetError) as group:
        logger.debug("The stdio client is gone (%s); the session is over", group.exceptions[0])


def bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket up front, so a busy port is a clear error rather than a server log line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP. Without it, a body
    # written after its headers waits for the client's delayed ACK (about 40 ms a response).
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener
