"""Build the MCP server around one database, and run it over Streamable HTTP or stdio."""

from __future__ import annotations

import logging
import socket

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ToolAnnotations

from safedb import __version__
from safedb.approval.verification import ApprovalRules
from safedb.audit import AuditStore
from safedb.db.backend import Database
from safedb.server.elicitation import ApprovalChannel
from safedb.server.tools import SafeDBTools
from safedb.settings import Settings
from safedb.sql.policy import DenyList

logger = logging.getLogger(__name__)

INSTRUCTIONS = """SafeDB gives access to one SQL database. Use list_tables and describe_table to learn the \
schema, and execute_query to run one SQL statement per call. Read-only statements run at once. Statements that \
change anything pause and ask the user for approval; if the user declines, nothing changes. Do not retry a \
declined statement unless the user asks."""

_LATE_ANSWER_GRACE = 300.0

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_MAY_CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def build_server(settings: Settings, database: Database, audit: AuditStore) -> MCPServer:
    """The MCP server for one database; every decision about a change is recorded in `audit`."""
    # requestState is sealed with the configured keys, so that processes sharing them (and the audit log)
    # can finish each other's rounds; without keys, a key of this process's own. It outlives the approval
    # timeout a little, so that a late answer reaches SafeDB and is recorded as timed out.
    ttl = settings.approval_timeout + _LATE_ANSWER_GRACE
    security = (
        RequestStateSecurity(keys=list(settings.request_state_keys), ttl=ttl)
        if settings.request_state_keys
        else RequestStateSecurity.ephemeral(ttl=ttl)
    )
    server: MCPServer = MCPServer(
        name="SafeDB", instructions=INSTRUCTIONS, version=__version__, request_state_security=security
    )
    tools = SafeDBTools(
        database,
        audit,
        ApprovalChannel(settings.approval_timeout, settings.progress_interval),
        DenyList(allowed_paths=settings.allowed_paths),
        ApprovalRules(min_production_justification=settings.min_production_justification),
        settings.text_rows,
    )
    server.add_tool(
        tools.execute_query, name="execute_query", title="Run SQL (asks before changes)", annotations=_MAY_CHANGE
    )
    server.add_tool(tools.list_tables, name="list_tables", title="List tables", annotations=_READ_ONLY)
    server.add_tool(tools.describe_table, name="describe_table", title="Describe a table", annotations=_READ_ONLY)
    return server


async def serve(settings: Settings, database: Database, audit: AuditStore, listener: socket.socket | None) -> None:
    """Serve `database` until stopped (HTTP on `listener`, or stdio when there is none), then close it and
    the audit log. Everything runs in this one event loop, which owns the database's connection pools."""
    try:
        server = build_server(settings, database, audit)
        if listener is None:
            await serve_stdio(server)
        else:
            await serve_http(server, settings, listener)
    finally:
        await database.aclose()
        audit.close()


async def serve_http(server: MCPServer, settings: Settings, listener: socket.socket) -> None:
    """Serve Streamable HTTP at /mcp on an already bound socket."""
    app = server.streamable_http_app(host=settings.host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


async def serve_stdio(server: MCPServer) -> None:
    await server.run_stdio_async()


def bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket up front, so a busy port is a clear error rather than a server log line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener
