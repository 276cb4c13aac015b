"""A real MCP client that asks SafeDB to run a DELETE and never answers the question it gets back, for tests
that kill it (SIGKILL) while the question waits. Prints `asked PROTOCOL_VERSION` on stdout once the question
has reached it, then waits for ever.

    python -m tests.server.undecided_client http URL
    python -m tests.server.undecided_client stdio DATABASE AUDIT_DB
    python -m tests.server.undecided_client socketpair DATABASE AUDIT_DB

`http` and `stdio` use the SDK's `Client` (handshake era, so that the server sends `elicitation/create`);
`stdio` gives the server pipes. `socketpair` speaks JSON-RPC itself over a socket pair, which is how hosts
built on Node (libuv) connect a stdio server, and leaves the question unread in the socket, as a busy host
would. In both stdio modes the server is started through `REPORTING_SERVER`, and shares this client's stderr.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitResult

DELETE_ONE = "DELETE FROM invoices WHERE id = 1"
HANDSHAKE_VERSION = "2025-11-25"

# The stdio server's command: `safedb serve` as a child whose process id and exit status go to stderr, so that
# the test can stop it by id and see how it ended (its client, killed, can no longer tell).
REPORTING_SERVER = """\
import subprocess, sys
server = subprocess.Popen([sys.executable, "-m", "safedb", *sys.argv[1:]])
print(f"server pid {server.pid}", file=sys.stderr, flush=True)
print(f"server exit status {server.wait()}", file=sys.stderr, flush=True)
"""


def server_command(database: str, audit_db: str) -> list[str]:
    serve = ["serve", "--transport", "stdio", "--database", database, "--audit-db", audit_db]
    return [sys.executable, "-c", REPORTING_SERVER, *serve]


async def sdk_client(server: str | StdioServerParameters) -> None:
    protocol_version: list[str] = []

    async def undecided(context: Any, params: Any) -> ElicitResult:
        print("asked", *protocol_version, flush=True)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with Client(server, mode="legacy", elicitation_callback=undecided) as client:
        protocol_version.append(str(client.protocol_version))
        await client.call_tool("execute_query", {"query": DELETE_ONE})


def socketpair_client(command: list[str]) -> None:
    ours, theirs = socket.socketpair()
    subprocess.Popen(command, stdin=theirs.fileno(), stdout=theirs.fileno(), start_new_session=True)
    theirs.close()

    def send(message: dict[str, Any]) -> None:
        ours.sendall(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    initialize = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {"elicitation": {}}}
    send({"id": 1, "method": "initialize", "params": {**initialize, "clientInfo": {"name": "raw", "version": "1"}}})
    answer = b""
    while not answer.endswith(b"\n"):
        answer += ours.recv(1)
    send({"method": "notifications/initialized"})
    send({"id": 2, "method": "tools/call", "params": {"name": "execute_query", "arguments": {"query": DELETE_ONE}}})
    # Look at what arrives without reading it: the question stays in the socket, unread.
    while b'"elicitation/create"' not in ours.recv(1 << 16, socket.MSG_PEEK):
        time.sleep(0.01)
    print("asked", json.loads(answer)["result"]["protocolVersion"], flush=True)
    while True:
        time.sleep(60)


def main(mode: str, *args: str) -> None:
    if mode == "http":
        anyio.run(sdk_client, args[0])
    elif mode == "stdio":
        command, *arguments = server_command(*args)
        anyio.run(sdk_client, StdioServerParameters(command=command, args=arguments, env=dict(os.environ)))
    elif mode == "socketpair":
        socketpair_client(server_command(*args))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
