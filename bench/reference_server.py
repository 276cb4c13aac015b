"""The reference server: a plain `mcp` 2.x `MCPServer` with the same `execute_query` tool, no safety layer.

It serves the same SQLite file over the same stack as SafeDB (Starlette + uvicorn on an already bound
socket, Streamable HTTP at /mcp, both protocol eras). What it leaves out is SafeDB's safety layer: no
statement classification, no read-only connections or authorizer, no impact preview, no audit log, no
approval binding. It asks only when the statement contains one of the words DROP, DELETE or TRUNCATE,
through the SDK's resolver mechanism (`Resolve` + `Elicit`), which elicits mid-call in the handshake era
and returns an `InputRequiredResult` on 2026-07-28.

It binds its listening socket as uvicorn does when it binds itself (see `bind`), so responses are not
held back by Nagle's algorithm.

Comparability: results are capped like SafeDB's defaults (500 rows, about 512 KiB of values, counted the
same way); the tool returns a plain dict, so the SDK sends the rows as JSON text *and* as structured
content (SafeDB sends a 50-row text table plus the structured rows). It has no statement time limit.

    python -m bench.reference_server --database FILE [--port 0]
"""

from __future__ import annotations

import argparse
import logging
import queue
import re
import socket
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, ElicitationResult, Resolve
from pydantic import BaseModel, Field

logger = logging.getLogger(__name__)

DESTRUCTIVE = re.compile(r"\b(DROP|DELETE|TRUNCATE)\b", re.IGNORECASE)
MAX_ROWS = 500
MAX_BYTES = 512 * 1024
CONNECTIONS = 4
_BATCH = 256


class Confirmation(BaseModel):
    """The same three fields SafeDB asks for."""

    confirm: bool = Field(description="Must be true for the statement to run.")
    justification: str = Field(description="Why this change is needed.")
    environment: Literal["Development", "Staging", "Production"] = Field(description="The environment to change.")


async def ask_before_destroying(query: str) -> Confirmation | Elicit[Confirmation] | None:
    """Ask only when the statement contains DROP, DELETE or TRUNCATE; anything else runs as it is."""
    if DESTRUCTIVE.search(query):
        return Elicit(f"Run this statement?\n\n{query}", Confirmation)
    return None


class ConnectionPool:
    """A few read-write connections to one SQLite file, each used by one thread at a time."""

    def __init__(self, path: Path, size: int = CONNECTIONS) -> None:
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all = [
            sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0) for _ in range(size)
        ]
        for connection in self._all:
            self._idle.put(connection)

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        connection = self._idle.get()
        try:
            yield connection
        finally:
            self._idle.put(connection)

    def close(self) -> None:
        for connection in self._all:
            connection.close()


def _value(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    return value


def run_capped(connection: sqlite3.Connection, query: str) -> dict[str, Any]:
    """Run `query`; return at most MAX_ROWS rows and about MAX_BYTES bytes of values (SafeDB's defaults)."""
    cursor = connection.execute(query)
    columns = [column[0] for column in cursor.description or ()]
    rows: list[list[object]] = []
    size = 0
    truncated = False
    while columns and not truncated:
        batch = cursor.fetchmany(_BATCH)
        if not batch:
            break
        for raw in batch:
            row = [_value(value) for value in raw]
            size += sum(len(value) + 2 if isinstance(value, str) else 8 for value in row)
            if len(rows) >= MAX_ROWS or size > MAX_BYTES:
                truncated = True
                break
            rows.append(row)
    if not columns:
        return {"executed": True, "rows_affected": cursor.rowcount}
    cursor.close()
    return {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": truncated}


def build_server(pool: ConnectionPool) -> MCPServer:
    server: MCPServer = MCPServer(name="reference")

    def execute_query(
        query: str,
        approval: Annotated[ElicitationResult[Confirmation], Resolve(ask_before_destroying)],
    ) -> dict[str, Any]:
        """Run one SQL statement; DROP, DELETE and TRUNCATE ask first."""
        if approval.action != "accept" or (approval.data is not None and not approval.data.confirm):
            return {"executed": False, "message": f"Not run: the request was {approval.action}."}
        try:
            with pool.connection() as connection:
                return run_capped(connection, query)
        except sqlite3.Error as exc:
            return {"executed": False, "message": f"The database reported an error: {exc}"}

    server.add_tool(execute_query, name="execute_query")
    return server


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, created as uvicorn creates its own (protocol IPPROTO_TCP), so that asyncio sets
    TCP_NODELAY on every accepted connection. A socket made with protocol 0 does not get it, and then each
    response whose body is written after its head waits for the client's delayed ACK (about 40 ms)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(2048)
    return listener


async def serve(server: MCPServer, listener: socket.socket) -> None:
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    # The same logging set-up as `safedb serve` (INFO to stderr), so both servers log the same lines.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    pool = ConnectionPool(args.database)
    listener = bind(args.host, args.port)
    host, port = listener.getsockname()[:2]
    print(f"reference serving {args.database.name} at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    try:
        anyio.run(serve, build_server(pool), listener)
    except KeyboardInterrupt:
        pass
    finally:
        pool.close()


if __name__ == "__main__":
    main()
