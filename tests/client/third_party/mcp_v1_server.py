"""An elicitation server written with the Python SDK 1.x (`mcp==1.30.0`, `FastMCP`, handshake era), for testing
`safedb client` against a stack it did not grow up with. Run it in a venv holding mcp 1.x:

    python mcp_v1_server.py --stdio
    python mcp_v1_server.py --port 0      Streamable HTTP on 127.0.0.1; prints "listening at URL" on stderr

The schemas are the ones the SDK generates from pydantic models: optional fields come as
`anyOf: [{type: X}, {type: "null"}]` with `default: null`.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

import uvicorn
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field


class Booking(BaseModel):
    name: str = Field(description="Who books", min_length=2)
    nickname: str | None = None
    guests: int | None = Field(default=None, ge=1, le=8)
    budget: float | None = Field(default=None, gt=0)
    seating: str = "inside"
    newsletter: bool | None = None


server = FastMCP("mcp-v1-elicit")


@server.tool()
async def book(ctx: Context) -> str:
    """Ask for a booking and return what was answered, as JSON."""
    result = await ctx.elicit("Book a table", schema=Booking)
    if isinstance(result, AcceptedElicitation):
        return json.dumps({"action": "accept", "content": result.data.model_dump(exclude_unset=True)})
    return json.dumps({"action": result.action})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if options.stdio:
        server.run("stdio")
        return
    listener = socket.socket()
    listener.bind(("127.0.0.1", options.port))
    port = listener.getsockname()[1]
    listener.listen()  # before saying so: a client connecting between bind and uvicorn's listen is refused
    print(f"listening at http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
