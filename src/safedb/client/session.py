"""The interactive session (`safedb client`) and its commands, which scripts can run too (`-x`).

Commands: tools, call TOOL key=value..., TOOL key=value... (when TOOL is a tool), history, help, quit.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import Tool
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.history import InMemoryHistory
from pydantic import ValidationError

from safedb.client.arguments import ArgumentError, parse_arguments, require_utf8
from safedb.client.connection import Connection, MalformedReply, connection_lost
from safedb.client.interrupts import Interrupted, cancelled_by
from safedb.client.results import describe_tools, error_json, render_error, render_result, result_json
from safedb.client.sanitize import clean_text, shown_text
from safedb.client.words import split_words
from safedb.terminal_json import visible_json

logger = logging.getLogger(__name__)

HELP = """Commands:
  tools                       list the server's tools and their arguments
  call TOOL key=value ...     call a tool; values are read by the tool's schema (key:=JSON forces JSON)
  call TOOL '{"key": 1}'      call a tool with one JSON object
  TOOL key=value ...          the same, when TOOL is one of the server's tools
  history                     the commands entered in this session
  help                        this text
  quit                        leave (also: exit, Ctrl-D)
Values with spaces need quotes: call execute_query query="SELECT * FROM users"
When the server asks a question, a form appears: Ctrl-C or Esc cancels it."""

CALL_FAILURES = (MCPError, ValidationError, MalformedReply, RuntimeError, httpx2.HTTPError, OSError)


@dataclass(frozen=True)
class CommandOutcome:
    ok: bool = True
    quit: bool = False
    reconnect: bool = False
    """The server no longer knows the session: the command did not reach it, and a new connection is needed."""


_SESSION_ENDED = (
    "The server no longer knows this session (it restarted, or closed it after a while idle), so the command did not "
    "reach it and nothing ran. Connecting again: run the command again."
)


class CommandRunner:
    """Runs one command line against a connection and writes what it shows through `write`."""

    def __init__(self, connection: Connection, write: Callable[[str], None], *, json_output: bool = False) -> None:
        self.connection = connection
        self.history: list[str] = []
        self.write = write
        self._json_output = json_output
        self._tools: dict[str, Tool] | None = None

    async def tools(self) -> dict[str, Tool]:
        """The server's tools by name, listed once. MalformedReply when the server's list is not in MCP's form."""
        if self._tools is None:
            self._tools = {tool.name: tool for tool in await self.connection.list_tools()}
        return self._tools

    async def known_tools(self) -> dict[str, Tool]:
        """`tools`, or none when the server's list cannot be read (said once): tools are then called with `call`,
        and their arguments sent as typed."""
        try:
            return await self.tools()
        except MalformedReply as exc:
            logger.warning("%s; arguments are sent as typed.", clean_text(str(exc)))
            self._tools = {}
            return self._tools

    async def run(self, line: str) -> CommandOutcome:
        line = line.strip()
        if not line or line.startswith("#"):
            return CommandOutcome()
        self.history.append(line)
        try:
            words = split_words(line)
        except ValueError as exc:
            self.write(f"Cannot read that line: {exc}")
            return CommandOutcome(ok=False)
        command, rest = words[0].lower(), words[1:]
        if command in ("quit", "exit", "q"):
            return CommandOutcome(quit=True)
        if command in ("help", "?"):
            self.write(HELP)
            return CommandOutcome()
        if command == "history":
            self.write("\n".join(f"{number:4}  {entry}" for number, entry in enumerate(self.history, 1)))
            return CommandOutcome()
        try:
            if command == "tools":
                self._tools = None
                self.write(describe_tools(list((await self.tools()).values())))
                return CommandOutcome()
            if command == "call":
                if not rest:
                    self.write("Usage: call TOOL key=value ...")
                    return CommandOutcome(ok=False)
                return await self.call(rest[0], rest[1:])
            if words[0] in await self.known_tools():
                return await self.call(words[0], rest)
        except CALL_FAILURES as exc:
            if self.connection.session_ended:
                self.write(_SESSION_ENDED)
                return CommandOutcome(ok=False, reconnect=True)
            self.write(f"Error: {clean_text(str(exc))}")
            return CommandOutcome(ok=False)
        self.write(f"Unknown command {clean_text(words[0], multiline=False)!r}. Type help for the commands.")
        return CommandOutcome(ok=False)

    async def call(self, name: str, words: Sequence[str]) -> CommandOutcome:
        try:
            require_utf8(name, "the tool name")
            tool = (await self.known_tools()).get(name)
            arguments = parse_arguments(words, tool.input_schema if tool is not None else None)
        except ArgumentError as exc:
            self.write(f"Error: {exc}")
            return CommandOutcome(ok=False)
        try:
            result = await self.connection.call_tool(name, arguments)
        except MalformedReply as exc:
            self.write(f"Error: {clean_text(str(exc))}")
            return CommandOutcome(ok=False)
        except MCPError as exc:
            if connection_lost(exc):
                raise  # not an answer from the server: it is gone
            if self.connection.session_ended:
                self.write(_SESSION_ENDED)
                return CommandOutcome(ok=False, reconnect=True)
            self.write(visible_json(error_json(exc.error), indent=2) if self._json_output else render_error(exc.error))
            return CommandOutcome(ok=False)
        except RuntimeError as exc:  # e.g. a 2026-07-28 server that asks for input round after round, without end
            self.write(f"Error: {clean_text(str(exc))}")
            return CommandOutcome(ok=False)
        self.write(visible_json(result_json(result), indent=2) if self._json_output else render_result(result))
        return CommandOutcome(ok=not result.is_error)


async def run_script(runner: CommandRunner, lines: Sequence[str]) -> bool:
    """Run command lines in order; True when every one succeeded. Stops at quit."""
    ok = True
    for line in lines:
        outcome = await runner.run(line)
        ok = ok and outcome.ok
        if outcome.quit:
            break
    return ok


async def interact(runner: CommandRunner, *, again: bool = False) -> bool:
    """The interactive loop: prompt, run, repeat until quit or Ctrl-D (False), or until the server no longer knows the
    session (True: connect again, and call this again on the new connection, `again=True`)."""
    server = runner.connection.server
    runner.write(f"Connected to {server.describe()} (protocol {runner.connection.client.protocol_version}).")
    if not again:
        runner.write("Type help for the commands, quit to leave.")
    tool_names = list(await runner.known_tools())
    completer = WordCompleter(["tools", "call", "history", "help", "quit", *tool_names], sentence=True)
    prompt: PromptSession[str] = PromptSession(history=InMemoryHistory(), completer=completer)
    name = shown_text(server.name or "mcp", multiline=False)
    while True:
        try:
            line = await prompt.prompt_async(f"{name}> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return False
        outcome = await _interruptible(runner, line)
        if outcome is None:
            runner.write("Interrupted.")
        elif outcome.quit:
            return False
        elif outcome.reconnect:
            return True


async def _interruptible(runner: CommandRunner, line: str) -> CommandOutcome | None:
    """Run one command; Ctrl-C while it runs stops it (None) rather than ending the whole session.

    A running tool call is abandoned, and the server told to cancel it. (At a form's prompt Ctrl-C is a key, which
    cancels the question; this is for the time between prompts, when the terminal sends SIGINT.)
    """
    try:
        return await cancelled_by((signal.SIGINT,), lambda: runner.run(line))
    except Interrupted:
        return None
