"""Driver for FastMCP's client (`fastmcp-slim[client]`), in `legacy` or `auto` mode, over Streamable HTTP or
stdio. Its elicitation handler returns the answer's content to accept, or an `ElicitResult` to decline.

Runs in its own venv (fastmcp-slim[client]==4.1.6); see scenario.py for the protocol with the test.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StdioTransport
from scenario import Recorder, emit, first_text, load_config, run_steps


async def main() -> None:
    config = load_config()
    recorder = Recorder(config)

    async def elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        schema = getattr(params, "requested_schema", None)
        action = recorder.asked(message, schema, "form" if schema is not None else "url")
        if action == "accept":
            return dict(config.answer)
        return ElicitResult(action="decline")

    transport: Any
    if config.url is not None:
        transport = config.url
    else:
        assert config.command is not None
        transport = StdioTransport(config.command, config.args, env=config.env, keep_alive=False)
    async with Client(transport, elicitation_handler=elicit, mode=config.mode) as client:
        tools = [tool.name for tool in await client.list_tools()]

        async def call(sql: str) -> tuple[bool, dict[str, Any] | None, str]:
            result = await client.call_tool("execute_query", {"query": sql}, raise_on_error=False)
            return bool(result.is_error), result.structured_content, first_text(result.content)

        with anyio.fail_after(120):
            await run_steps(recorder, call)
        protocol_version = client.protocol_version
    emit("FastMCP Client", version("fastmcp-slim"), protocol_version, tools, recorder)


if __name__ == "__main__":
    anyio.run(main)
