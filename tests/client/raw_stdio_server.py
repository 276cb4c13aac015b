"""A hand-written MCP server over stdio (handshake era), for replies the SDK's own servers never send.

`python -m tests.client.raw_stdio_server` lists the tools in TOOLS, one of whose input schemas is not a schema,
and answers a call to any of them with its name and arguments.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}}},
    {"name": "malformed", "inputSchema": {"type": "object", "properties": {"a": "not a schema"}}},
    {"name": "also_echo", "inputSchema": {"type": "object"}},
]


def reply(message_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification
        if method == "initialize":
            reply(message_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "Raw", "version": "1"},
            })  # fmt: skip
        elif method == "tools/list":
            reply(message_id, {"tools": TOOLS})
        elif method == "tools/call":
            text = json.dumps(message["params"], sort_keys=True)
            reply(message_id, {"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            reply(message_id, {})
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
