"""A hand-written MCP server over stdio (handshake era), for replies the SDK's own servers never send.

`python -m tests.client.raw_stdio_server` lists the tools in TOOLS, one of whose input schemas is not a schema,
and answers a call to any of them with its name and arguments. With an argument, its handshake goes wrong:
`no-capabilities` (a result MCP does not allow), `version=V` (a protocol version of its choosing), `not-utf8` (a
line of bytes that are not UTF-8 first, then the handshake as usual).

Two tools send JSON nested deeper than the SDK's parser goes (`DEEP` levels): `deep_reply` as its result,
`deep_question` in the schema of the question it asks first; it then answers with what came back.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}}},
    {"name": "malformed", "inputSchema": {"type": "object", "properties": {"a": "not a schema"}}},
    {"name": "also_echo", "inputSchema": {"type": "object"}},
    {"name": "deep_reply", "inputSchema": {"type": "object"}},
    {"name": "deep_question", "inputSchema": {"type": "object"}},
]
DEEP = 300


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        value = {"anyOf": [value]}
    return value


def reply(message_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    handshake = sys.argv[1] if len(sys.argv) > 1 else ""
    if handshake == "not-utf8":
        sys.stdout.buffer.write(b"\xff\xfe not utf-8 \xc3\x28\n")
        sys.stdout.flush()
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": handshake.removeprefix("version=")
                if handshake.startswith("version=")
                else "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "Raw", "version": "1"},
            }
            if handshake == "no-capabilities":
                del result["capabilities"]
            reply(message_id, result)
        elif method == "tools/list":
            reply(message_id, {"tools": TOOLS})
        elif method == "tools/call" and message["params"]["name"] == "deep_reply":
            reply(message_id, {"content": [], "structuredContent": nested(DEEP)})
        elif method == "tools/call" and message["params"]["name"] == "deep_question":
            schema = {"type": "object", "properties": {"a": nested(DEEP)}}
            params = {"mode": "form", "message": "Deep?", "requestedSchema": schema}
            sys.stdout.write(
                json.dumps({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": params})
            )
            sys.stdout.write("\n")
            sys.stdout.flush()
            answer = json.loads(sys.stdin.readline())
            reply(message_id, {"content": [{"type": "text", "text": json.dumps(answer, sort_keys=True)}]})
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
