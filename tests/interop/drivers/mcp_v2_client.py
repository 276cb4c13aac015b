"""Driver for the Python SDK `mcp` 2.x `Client`, in `legacy` (handshake) or `auto` (2026-07-28) mode, over
Streamable HTTP or stdio.

Runs in its own venv (mcp==2.3.0); see scenario.py for the protocol with the test.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult
from scenario import Recorder, emit, first_text, load_config, run_steps


async def main() -> None:
    config = load_config()
    recorder = Recorder(config)

    async def elicit(context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        if isinstance(params, ElicitRequestFormParams):
            action = recorder.asked(params.message, params.requested_schema)
        else:
            action = recorder.asked(params.message, None, "url")
        if action == "accept":
            return ElicitResult(action="accept", content=config.answer)
        return ElicitResult(action="decline")

    server: str | StdioServerParameters
    if config.url is not None:
        server = config.url
    else:
        assert config.command is not None
        server = StdioServerParameters(command=config.command, args=config.args, env=config.env)
    async with Client(server, mode=config.mode, elicitation_callback=elicit) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]

        async def call(sql: str) -> tuple[bool, dict[str, Any] | None, str]:
            result = await client.call_tool("execute_query", {"query": sql})
            return bool(result.is_error), result.structured_content, first_text(result.content)

        with anyio.fail_after(120):
            await run_steps(recorder, call)
        protocol_version = client.protocol_version
    emit("mcp Client", version("mcp"), protocol_version, tools, recorder)


if __name__ == "__main__":
    anyio.run(main)
