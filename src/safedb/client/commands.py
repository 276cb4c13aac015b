"""The `safedb client`, `safedb call` and `safedb demo` commands: parse options, then delegate."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
import httpx2
from mcp.shared.exceptions import MCPError
from prompt_toolkit.application import create_app_session
from prompt_toolkit.output import create_output
from pydantic import ValidationError

from safedb.cli_options import abandon_stdout, output_failure
from safedb.client.config_variables import PromptInput
from safedb.client.connection import ERA_MODES, Connection, EraUnavailable, connect
from safedb.client.console_log import log_to_console
from safedb.client.demo import demo_server, run_demo
from safedb.client.form import TerminalAnswerer
from safedb.client.interrupts import Interrupted, cancelled_by
from safedb.client.requests import Answerer
from safedb.client.result_type import first_problem
from safedb.client.rules import AnswerRules, RuleAnswerer, RuleDecision, RulesFileError, load_rules
from safedb.client.sanitize import clean_text
from safedb.client.session import CommandRunner, interact, run_script
from safedb.client.targets import Target, TargetError, config_target, http_target, stdio_target
from safedb.db.demo import DEMO_FILE_NAME, ensure_demo_database
from safedb.errors import DatabaseOpenError
from safedb.settings import default_data_dir

_T = TypeVar("_T")

_target_options = [
    click.option("--stdio", "stdio_command", metavar="COMMAND", help="Start this server command; talk over its stdio."),
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="An mcpServers JSON file (Claude Desktop, VS Code, mcp-use format)."),
    click.option(
        "--server", "server_name", metavar="NAME", help="Which server of --config to use (needed when it has several)."
    ),
    click.option("--input", "inputs", multiple=True, metavar="ID=VALUE",
                 help="The value of ${input:ID} in --config (otherwise asked in the terminal; repeatable)."),
    click.option("--header", "headers", multiple=True, metavar="NAME:VALUE", help="HTTP header to send (repeatable)."),
    click.option("--era", type=click.Choice(list(ERA_MODES)), default="auto", show_default=True,
                 help="Protocol era: auto-negotiate, the initialize handshake (2025-11-25), or 2026-07-28."),
    click.option("--answers", "answers_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="Answer questions from the rules in this JSON/TOML file, without asking (see docs/client.md)."),
    click.option("--decline-all", is_flag=True, help="Decline every question without asking."),
]  # fmt: skip


def _with_target_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_target_options):
        function = option(function)
    return function


@click.command(short_help="Use any MCP server's tools, answering its questions.")
@click.argument("target", required=False, metavar="[URL]")
@_with_target_options
@click.option("-x", "--execute", "commands", multiple=True, metavar="COMMAND",
              help="Run this session command and exit (repeatable), e.g. -x 'call list_tables'.")  # fmt: skip
def client(
    target: str | None,
    stdio_command: str | None,
    config_file: Path | None,
    server_name: str | None,
    inputs: tuple[str, ...],
    headers: tuple[str, ...],
    era: str,
    answers_file: Path | None,
    decline_all: bool,
    commands: tuple[str, ...],
) -> None:
    """Connect to any MCP server and use its tools, answering its questions (elicitations) in this terminal.

    URL is the server's http(s) URL; or use --stdio "command args", or --config FILE --server NAME.
    Without -x, commands are read interactively (or from standard input when it is not a terminal).
    """
    chosen = _target(target, stdio_command, config_file, server_name, headers, inputs)
    answerer = _answerer(answers_file, decline_all)

    reconnected = False

    async def session(connection: Connection) -> bool | _Again:
        nonlocal reconnected
        runner = CommandRunner(connection, _write)
        if commands:
            return await run_script(runner, commands)
        if sys.stdin.isatty():
            if await interact(runner, again=reconnected):  # the server no longer knows the session
                reconnected = True
                return _AGAIN
            return True
        return await run_script(runner, sys.stdin.read().splitlines())

    _exit(_run(chosen, answerer, era, session))


@click.command(short_help="Call one tool and print its result.")
@click.argument("words", nargs=-1, required=True, metavar="[URL] TOOL [KEY=VALUE]...")
@_with_target_options
@click.option("--json", "json_output", is_flag=True, help="Print the whole result as JSON (for scripts).")
def call(
    words: tuple[str, ...],
    stdio_command: str | None,
    config_file: Path | None,
    server_name: str | None,
    inputs: tuple[str, ...],
    headers: tuple[str, ...],
    era: str,
    answers_file: Path | None,
    decline_all: bool,
    json_output: bool,
) -> None:
    """Call one tool and print its result; questions from the server are asked here (or answered by rules).

    Arguments are KEY=VALUE pairs read by the tool's input schema (KEY:=JSON forces JSON), or one JSON
    object. Exits 1 when the tool reports an error or the server answers the call with one.
    """
    # A URL is taken as one even beside --stdio or --config, which `_target` then refuses: not as the tool's name.
    named_elsewhere = (stdio_command is not None or config_file is not None) and "://" not in words[0]
    url, rest = (None, words) if named_elsewhere else (words[0], words[1:])
    if not rest:
        where = "" if named_elsewhere else " after the server's URL (or give --stdio COMMAND or --config FILE)"
        raise click.UsageError(f"Name the tool to call{where}: safedb call [URL] TOOL [KEY=VALUE]...")
    chosen = _target(url, stdio_command, config_file, server_name, headers, inputs)
    answerer = _answerer(answers_file, decline_all, quiet=json_output)

    async def one_call(connection: Connection) -> bool:
        runner = CommandRunner(connection, _write, json_output=json_output)
        return (await runner.call(rest[0], rest[1:])).ok

    _exit(_run(chosen, answerer, era, one_call))


@click.command(short_help="Show SafeDB at work: a read runs, a DROP TABLE asks.")
@click.argument("url", required=False)
@click.option(
    "--data-dir", type=click.Path(file_okay=False), help="Where the demo database lives (when no URL is given)."
)
@click.option("--era", type=click.Choice(list(ERA_MODES)), default="auto", show_default=True,
              help="Protocol era: auto-negotiate, the initialize handshake (2025-11-25), or 2026-07-28.")  # fmt: skip
@click.option("--answers", "answers_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Answer the approval question from a rules file instead of asking.")  # fmt: skip
@click.option("--decline-all", is_flag=True, help="Decline the approval question without asking.")
def demo(url: str | None, data_dir: str | None, era: str, answers_file: Path | None, decline_all: bool) -> None:
    """Show SafeDB at work: a safe query returns at once, then DROP TABLE invoices asks you first.

    Without URL, a SafeDB server on the demo database is started for the demo (over stdio).
    """
    chosen: Target = _target(url, None, None, None, ()) if url else demo_server(data_dir)
    answerer = _answerer(answers_file, decline_all)
    if url is None and data_dir is not None:
        _make_demo_database(Path(data_dir))

    if url is not None:
        no_invoices = (
            "the server serves another database, or an earlier run of the demo dropped it. Serve the demo database "
            "(`safedb serve` without --database; delete demo.db in its data directory to make it anew)."
        )
    else:
        served_from = data_dir or os.environ.get("SAFEDB_DATA_DIR") or default_data_dir()  # as `serve` reads it
        no_invoices = (
            f"an earlier run of the demo dropped it. Delete {Path(served_from) / DEMO_FILE_NAME} to start over."
        )

    async def scenario(connection: Connection) -> bool:
        return await run_demo(CommandRunner(connection, _write), _write, no_invoices)

    _exit(_run(chosen, answerer, era, scenario))


def _make_demo_database(data_dir: Path) -> None:
    """The demo server's database, made before it starts: in a directory that cannot hold it, the server would say so
    and exit, and the client would add a misleading "Cannot talk to ...: Connection closed" after its error."""
    try:
        ensure_demo_database(data_dir)
    except DatabaseOpenError as exc:
        raise click.ClickException(str(exc)) from None


def _target(
    url: str | None,
    stdio_command: str | None,
    config_file: Path | None,
    server_name: str | None,
    headers: Sequence[str],
    inputs: Sequence[str] = (),
) -> Target:
    given = [choice for choice in (url, stdio_command, config_file) if choice is not None]
    if len(given) != 1:
        raise click.UsageError("Give exactly one server: a URL, --stdio COMMAND, or --config FILE --server NAME.")
    if inputs and config_file is None:
        raise click.UsageError("--input gives values to a --config file's ${input:ID} variables.")
    if server_name is not None and config_file is None:
        raise click.UsageError("--server NAME picks one of the servers of a --config file.")
    if headers and url is None:
        raise click.UsageError(
            "--header goes with a server's URL (over stdio there are no HTTP requests; a --config file's server "
            "takes its own 'headers')."
        )
    try:
        if config_file is not None:
            # Asked on the terminal only: without one, standard input may be the session's commands.
            ask = _ask_input if sys.stdin.isatty() else None
            return config_target(config_file, server_name, inputs=_inputs(inputs), ask=ask, warn=_warn)
        if stdio_command is not None:
            return stdio_target(stdio_command)
        assert url is not None
        return http_target(url, _headers(headers))
    except TargetError as exc:
        # It may quote a config file that came with someone else's project (an input's description, a name).
        raise click.ClickException(clean_text(str(exc), multiline=False)) from None


def _inputs(inputs: Sequence[str]) -> dict[str, str]:
    parsed = {}
    for given in inputs:
        input_id, separator, value = given.partition("=")
        if not separator or not input_id:
            # Not repeated: what was given may be a secret.
            raise click.UsageError("--input takes ID=VALUE: the id of one of the config file's inputs, =, its value.")
        parsed[input_id] = value
    return parsed


def _ask_input(declared: PromptInput) -> str:
    # The config file may come with a project someone else wrote: its words are cleaned as a server's are.
    label = clean_text(declared.description or declared.id, multiline=False)
    return str(click.prompt(label, default=declared.default, hide_input=declared.password,
                            show_default=not declared.password and bool(declared.default), err=True))  # fmt: skip


def _warn(message: str) -> None:
    click.echo(f"Warning: {clean_text(message, multiline=False)}", err=True)


def _headers(headers: Sequence[str]) -> dict[str, str]:
    parsed = {}
    for header in headers:
        name, separator, value = header.partition(":")
        if not separator or not name.strip():
            raise click.UsageError(f"--header {header!r} is not NAME:VALUE")
        parsed[name.strip()] = value.strip()
    return parsed


def _answerer(answers_file: Path | None, decline_all: bool, *, quiet: bool = False) -> Answerer:
    if answers_file is not None and decline_all:
        raise click.UsageError("Use either --answers or --decline-all, not both.")
    report = None if quiet else _report_decision
    if answers_file is not None:
        try:
            return RuleAnswerer(load_rules(answers_file), report)
        except RulesFileError as exc:
            raise click.ClickException(str(exc)) from None
    if decline_all:
        return RuleAnswerer(
            AnswerRules(), None if quiet else functools.partial(_report_decision, reason="--decline-all")
        )
    if sys.stdin.isatty() and (sys.stdout.isatty() or sys.stderr.isatty()):
        return TerminalAnswerer()
    return RuleAnswerer(AnswerRules(), _report_no_terminal)


def _report_decision(decision: RuleDecision, reason: str | None = None) -> None:
    first_line = next(iter(decision.request.params.message.splitlines()), "")
    line = (
        f"[{decision.request.server.describe()}] question answered {decision.result.action} "
        f"({reason or decision.reason}): " + first_line[:100]
    )
    # The server's words (its name, its message, its field names in the reason) are cleaned as the form
    # cleans them: a server must not be able to send escape sequences to the terminal.
    click.echo(clean_text(line, multiline=False), err=True)


def _report_no_terminal(decision: RuleDecision) -> None:
    click.echo("The server asked a question, but there is no terminal to ask it in: declined. "
               "Use --answers FILE to answer questions without a terminal.", err=True)  # fmt: skip


class _Again:
    """What a session's work returns to connect again (a new session) and go on."""


_AGAIN = _Again()


def _run(target: Target, answerer: Answerer, era: str, work: Callable[[Connection], Awaitable[_T | _Again]]) -> _T:
    async def main() -> _T:
        while True:
            async with connect(target, answerer, era) as connection:
                result = await work(connection)
            if not isinstance(result, _Again):
                return result

    log_to_console()

    # Forms go to the terminal: to stderr when stdout is redirected (e.g. `safedb call --json | jq`).
    session = nullcontext() if sys.stdout.isatty() else create_app_session(output=create_output(stdout=sys.stderr))
    try:
        with session:
            return anyio.run(_until_terminated, main)
    except* _OutputFailed as group:
        error = _first_error(group)
        abandon_stdout()
        if isinstance(error, _OutputFailed) and isinstance(error.error, BrokenPipeError):
            sys.exit(1)  # the reader of stdout went away (`| head`): end quietly, as click does
        raise click.ClickException(str(error)) from None
    except* ValidationError as group:  # its handshake, in a form MCP does not allow
        error = _first_error(group)
        problem = first_problem(error) if isinstance(error, ValidationError) else str(error)
        raise click.ClickException(
            f"Cannot talk to {target.describe()}: it answered in a form MCP does not allow ({clean_text(problem)})"
        ) from None
    # RuntimeError: the SDK's, for a protocol version it does not speak, quoting the server.
    except* (OSError, httpx2.HTTPError, MCPError, EraUnavailable, RuntimeError) as group:
        raise click.ClickException(f"Cannot talk to {target.describe()}: {_first_message(group)}") from None


class _OutputFailed(Exception):
    """What the client prints could not be written (stdout on a full disk, a closed pipe): not the server's doing,
    which an OSError from inside the session would be taken for."""

    def __init__(self, error: OSError) -> None:
        super().__init__(output_failure(error))
        self.error = error


def _write(text: str) -> None:
    """Print a result or a session's line on stdout."""
    try:
        click.echo(text)
    except OSError as exc:
        raise _OutputFailed(exc) from exc


_TERMINATING = tuple(signal.Signals[name] for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


async def _until_terminated(main: Callable[[], Awaitable[_T]]) -> _T:
    """`main()`, cancelled by SIGTERM or SIGHUP (a process manager stopping the client, a closed terminal) so that
    it ends its session and stops the stdio server it started (their default action ended the client at once and
    left that server running); then exit with the usual status, 128 + the signal's number."""
    try:
        return await cancelled_by(_TERMINATING, main)
    except Interrupted as stop:
        click.echo(f"Stopped by {stop.signal.name}.", err=True)
        sys.exit(128 + stop.signal)


def _first_message(group: BaseExceptionGroup[Any]) -> str:
    """The first error's first line, cleaned: it may quote the server (a JSON-RPC error message, what it sent)."""
    first = _first_error(group)
    line = next(iter(clean_text(str(first)).splitlines()), "").strip()
    return line or type(first).__name__


def _first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _exit(ok: bool) -> None:
    if not ok:
        sys.exit(1)
