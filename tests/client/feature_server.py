"""A small non-SafeDB MCP server whose tools ask for every elicitation schema feature, in both protocol eras.

Run it with `python -m tests.client.feature_server --port 0` (prints "listening at URL" on stderr) or
`--stdio` (`--banner TEXT` first prints TEXT on stdout, as careless stdio servers do). Every tool
returns what the client answered as structured content, so tests can check exactly what was sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from mcp_types.version import is_version_at_least

EVERY_FEATURE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Full name", "minLength": 2, "maxLength": 20},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "homepage": {"type": "string", "format": "uri"},
        "birthday": {"type": "string", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "score": {"type": "number", "minimum": 0, "maximum": 10},
        "subscribe": {"type": "boolean", "default": True},
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "size": {
            "type": "string",
            "oneOf": [
                {"const": "s", "title": "Small"},
                {"const": "m", "title": "Medium"},
                {"const": "l", "title": "Large"},
            ],
        },
        "plan": {"type": "string", "enum": ["free", "pro"], "enumNames": ["Free plan", "Pro plan"], "default": "free"},
        "toppings": {
            "type": "array",
            "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "days": {
            "type": "array",
            "items": {"anyOf": [{"const": "mon", "title": "Monday"}, {"const": "tue", "title": "Tuesday"}]},
            "default": ["mon"],
        },
        "first-name": {"type": "string", "title": "A name that is not an identifier"},
    },
    "required": ["name", "email", "age", "color", "toppings"],
}

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "title": "OK?"}},
    "required": ["ok"],
}

MESSAGE = "Please fill in the \x1b[31mfeature\x1b[0m form.\x1b]0;evil title\x07 Thanks!"


def speaks_input_required(ctx: Context[Any, Any]) -> bool:
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, "2026-07-28")


def answers_result(results: dict[str, ElicitResult]) -> CallToolResult:
    structured = {key: result.model_dump(mode="json", exclude_none=True) for key, result in results.items()}
    text = ", ".join(f"{key}: {result.action}" for key, result in results.items())
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


async def ask_forms(
    ctx: Context[Any, Any], questions: dict[str, tuple[str, dict[str, Any]]]
) -> CallToolResult | InputRequiredResult:
    """Ask every question at once: as concurrent elicitation/create requests, or as one InputRequiredResult."""
    if speaks_input_required(ctx):
        responses = ctx.input_responses or {}
        if all(isinstance(responses.get(key), ElicitResult) for key in questions):
            return answers_result({key: responses[key] for key in questions})  # type: ignore[misc]
        requests = {
            key: ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
            for key, (message, schema) in questions.items()
        }
        return InputRequiredResult(input_requests=requests, request_state="asked")  # type: ignore[arg-type]
    results: dict[str, ElicitResult] = {}

    async def ask(key: str, message: str, schema: dict[str, Any]) -> None:
        results[key] = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)

    async with anyio.create_task_group() as group:
        for key, (message, schema) in questions.items():
            group.start_soon(ask, key, message, schema)
    return answers_result({key: results[key] for key in questions})


async def log_and_echo(text: str, ctx: Context[Any, Any]) -> str:
    """Send log messages at three levels (one an object, from a named logger), then return the text."""
    await ctx.log("info", "only for the curious")
    await ctx.log("warning", "the cache is cold")
    await ctx.log("error", {"code": 7, "detail": "\x1b[31mred"}, logger_name="db")
    return text


def build_server() -> MCPServer:
    server = MCPServer(name="Feature Server", instructions="Asks for every elicitation schema feature.")

    async def ask_everything(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Ask for one form with every schema feature."""
        return await ask_forms(ctx, {"form": (MESSAGE, EVERY_FEATURE_SCHEMA)})

    async def ask_three(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Ask three questions at once."""
        return await ask_forms(ctx, {f"q{n}": (f"Question number {n}", CONFIRM_SCHEMA) for n in (1, 2, 3)})

    async def ask_without_words(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Ask a question whose message is empty."""
        return await ask_forms(ctx, {"blank": ("", CONFIRM_SCHEMA)})

    async def ask_secret(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Ask for an API key in form mode (which the spec forbids)."""
        schema = {"type": "object", "properties": {"api_key": {"type": "string", "title": "API key"}}}
        return await ask_forms(ctx, {"secret": ("Paste your API key", schema)})

    async def ask_for(
        requested_schema: dict[str, Any], ctx: Context[Any, Any], message: str = "Please answer"
    ) -> CallToolResult | InputRequiredResult:
        """Ask for one form with exactly the given requested schema."""
        return await ask_forms(ctx, {"form": (message, requested_schema)})

    def refuse_with_an_error(
        message: str = "this tool answers every call with a JSON-RPC error", code: int = INVALID_PARAMS
    ) -> str:
        """Answer the call with a JSON-RPC error (with the given message and code), not a result."""
        raise MCPError(code, message)

    async def ask_url(ctx: Context[Any, Any]) -> CallToolResult | InputRequiredResult:
        """Send the person to a web page (URL mode)."""
        url = "https://example.com/approve?request=42"
        if speaks_input_required(ctx):
            response = (ctx.input_responses or {}).get("page")
            if isinstance(response, ElicitResult):
                return answers_result({"page": response})
            request = ElicitRequest(params=ElicitRequestURLParams(message="Approve on the web page", url=url))
            return InputRequiredResult(input_requests={"page": request}, request_state="url")  # type: ignore[arg-type]
        result = await ctx.session.elicit_url(
            "Approve on the web page", url, "page-42", related_request_id=ctx.request_id
        )
        if result.action == "accept":
            await ctx.session.send_elicit_complete("page-42", related_request_id=ctx.request_id)
        return answers_result({"page": result})

    authorized: set[str] = set()
    background: set[asyncio.Task[None]] = set()

    async def needs_authorization(ctx: Context[Any, Any]) -> str:
        """Handshake era: refuse with "URL elicitation required" until the page reports completion."""
        if "auth-7" in authorized:
            return "authorized"
        session = ctx.session

        async def complete_later() -> None:
            await asyncio.sleep(0.2)
            authorized.add("auth-7")
            await session.send_elicit_complete("auth-7")

        task = asyncio.get_running_loop().create_task(complete_later())
        background.add(task)
        task.add_done_callback(background.discard)
        page = ElicitRequestURLParams(
            message="Authorize access", url="https://example.com/auth", elicitation_id="auth-7"
        )
        raise UrlElicitationRequiredError([page])

    async def ask_then_exit(ctx: Context[Any, Any], after: float = 1.0) -> str:
        """Handshake era, over stdio: ask, then end the whole server process while the question is open."""
        asyncio.get_running_loop().call_later(after, os._exit, 0)
        result = await ctx.session.elicit_form(
            "The server stops while you answer", CONFIRM_SCHEMA, related_request_id=ctx.request_id
        )
        return result.action

    def echo(text: str, count: int = 1, loud: bool = False) -> str:
        """Return the text, repeated; no questions asked."""
        return " ".join([text.upper() if loud else text] * count)

    tools = (
        ask_everything,
        ask_three,
        ask_without_words,
        ask_secret,
        ask_for,
        refuse_with_an_error,
        ask_url,
        needs_authorization,
        ask_then_exit,
        log_and_echo,
        echo,
    )
    for tool in tools:
        server.add_tool(tool)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--banner", help="A line to print on stdout before speaking MCP there (with --stdio).")
    options = parser.parse_args()
    server = build_server()
    if options.stdio:
        if options.banner is not None:
            print(options.banner, flush=True)
        anyio.run(server.run_stdio_async)
        return
    serve_over_http(server.streamable_http_app(host="127.0.0.1"), options.port)


def serve_over_http(app: Any, port: int, **config: Any) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: a free one) with uvicorn (`config`: more of its settings), saying
    "listening at URL" on stderr once it listens."""
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **config))

    async def serve() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(web.serve)
            while not web.started:
                await anyio.sleep(0.01)
            bound = web.servers[0].sockets[0].getsockname()[1]
            print(f"listening at http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)

    anyio.run(serve)


if __name__ == "__main__":
    main()
