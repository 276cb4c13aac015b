"""A small MCP server for the red-team tests: it asks what a test tells it to, in both protocol eras.

Run it with `python -m tests.client.redteam_server --port 0` (prints "listening at URL" on stderr), or
`--stdio`. `--hang-on METHOD` never answers HTTP requests of that method (such as DELETE).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from tests.client.feature_server import (
    CONFIRM_SCHEMA,
    answers_result,
    ask_forms,
    serve_over_http,
    speaks_input_required,
)


def build_server() -> MCPServer:
    server = MCPServer(name="Red Team Server")

    async def ask_url_to(url: str, ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Send the person to exactly the given URL (URL mode)."""
        if speaks_input_required(ctx):
            response = (ctx.input_responses or {}).get("page")
            if isinstance(response, ElicitResult):
                return answers_result({"page": response})
            request = ElicitRequest(params=ElicitRequestURLParams(message="Open this page", url=url))
            return InputRequiredResult(input_requests={"page": request}, request_state="url")  # type: ignore[arg-type]
        result = await ctx.session.elicit_url("Open this page", url, "page-1", related_request_id=ctx.request_id)
        return answers_result({"page": result})

    def environment(name: str) -> str:
        """The value of one environment variable of this server process ("(unset)" when it has none)."""
        return os.environ.get(name, "(unset)")

    def process_facts(names: list[str]) -> dict[str, Any]:
        """This server process's working directory, command line and the named environment variables (null: unset)."""
        return {"cwd": os.getcwd(), "argv": sys.argv, "env": {name: os.environ.get(name) for name in names}}

    def write_stderr(lines: list[str], repeat: int = 1, unfinished: str = "") -> str:
        """Write the lines on stderr `repeat` times, numbered ("3: ..."), then `unfinished` without a line break."""
        for number in range(1, repeat + 1):
            for line in lines:
                sys.stderr.write(f"{number}: {line}\n")
        sys.stderr.write(unfinished)
        sys.stderr.flush()
        return "written"

    async def ask_after_writing_stderr(
        lines: list[str], ctx: Context[Any, Any]
    ) -> CallToolResult | InputRequiredResult:
        """Ask, and write the lines on stderr a moment later, while the question is open (a hostile server would
        write a question header of its own)."""

        def write_soon() -> None:
            time.sleep(0.3)
            for line in lines:
                sys.stderr.write(f"{line}\n")
            sys.stderr.flush()

        if not ctx.input_responses:
            threading.Thread(target=write_soon, daemon=True).start()
        return await ask_forms(ctx, {"confirm": ("Is this the real question?", CONFIRM_SCHEMA)})

    def leave_stderr_open(seconds: float) -> int:
        """Start a process outside this server's process group that keeps its stderr open; return its pid."""
        sleeper = [sys.executable, "-c", f"import time; time.sleep({seconds!r})"]
        quiet = subprocess.DEVNULL
        return subprocess.Popen(sleeper, stdin=quiet, stdout=quiet, start_new_session=True).pid

    outcomes: list[str] = []

    async def slow(seconds: float) -> str:
        """Answer after the given number of seconds."""
        outcomes.append(f"slow {seconds} started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            outcomes.append(f"slow {seconds} cancelled")
            raise
        outcomes.append(f"slow {seconds} done")
        return "done"

    def slow_outcomes() -> str:
        """How each call of slow ended, in order."""
        return ", ".join(outcomes) or "none"

    server.add_tool(ask_url_to)
    server.add_tool(slow)
    server.add_tool(slow_outcomes)
    server.add_tool(environment)
    server.add_tool(write_stderr)
    server.add_tool(process_facts)
    server.add_tool(leave_stderr_open)
    server.add_tool(ask_after_writing_stderr)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--hang-on", metavar="METHOD", help="Never answer HTTP requests of this method.")
    options = parser.parse_args()
    if options.stdio:
        anyio.run(build_server().run_stdio_async)
        return
    mcp_app = build_server().streamable_http_app(host="127.0.0.1")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == options.hang_on:
            await anyio.sleep_forever()
        await mcp_app(scope, receive, send)

    serve_over_http(app, options.port, timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
