"""Driver for the Python SDK `mcp` 1.x: `ClientSession` over Streamable HTTP or `stdio_client` (handshake era).

Runs in its own venv (mcp==1.30.0); see scenario.py for the protocol with the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from scenario import Config, Recorder, emit, first_text, load_config, run_steps


@contextlib.asynccontextmanager
async def streams(config: Config) -> AsyncIterator[tuple[Any, Any]]:
    if config.url is not None:
        async with streamable_http_client(config.url) as (read, write, _session_id):
            yield read, write
    else:
        assert config.command is not None
        parameters = StdioServerParameters(command=config.command, args=config.args, env=config.env)
        async with stdio_client(parameters) as (read, write):
            yield read, write


async def main() -> None:
    config = load_config()
    recorder = Recorder(config)

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requestedSchema", None)
        action = recorder.asked(params.message, schema, getattr(params, "mode", None) or "form")
        if action == "accept":
            return types.ElicitResult(action="accept", content=config.answer)
        return types.ElicitResult(action="decline")

    async with streams(config) as (read, write), ClientSession(read, write, elicitation_callback=elicit) as session:
        initialized = await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]

        async def call(sql: str) -> tuple[bool, dict[str, Any] | None, str]:
            result = await session.call_tool("execute_query", {"query": sql})
            return bool(result.isError), result.structuredContent, first_text(result.content)

        with anyio.fail_after(120):
            await run_steps(recorder, call)
    emit("mcp ClientSession", version("mcp"), str(initialized.protocolVersion), tools, recorder)


if __name__ == "__main__":
    anyio.run(main)
