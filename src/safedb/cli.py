"""The `safedb` command. Commands parse their options and delegate; errors end as one clear line."""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import click
from click.core import ParameterSource

from safedb import __version__, launch
from safedb.audit.commands import audit_commands
from safedb.cli_options import VariableOption, abandon_stdout, is_utf8, output_failure
from safedb.errors import SafeDBError
from safedb.settings import Transport, default_data_dir
from safedb.web.passwords import hash_password

logger = logging.getLogger("safedb")

MIN_STATE_KEY_BYTES = 32


class Seconds(click.FloatRange):
    """A finite number of seconds within a range: `inf` and `nan` parse as floats, and `nan` passes any range."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            seconds = super().convert(value, param, ctx)
        except click.BadParameter:
            if isinstance(value, str) and not _is_number(value):  # click's own words: "is not a valid seconds"
                self.fail(f"{value!r} is not a number of seconds.", param, ctx)
            raise
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _configure_logging(level: str) -> None:
    """Logs go to stderr: on stdio, stdout carries only the protocol."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # sqlglot warns about every statement form it only partly understands; SafeDB treats those as unknown.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    logging.getLogger("httpx").setLevel(logging.WARNING)


class SafeDBCommands(click.Group):
    """The `safedb` group; the terminal client's commands are imported only when used (prompt_toolkit
    and the client are not needed to serve)."""

    LAZY: ClassVar[frozenset[str]] = frozenset({"client", "call", "demo"})
    """Names of the commands in `safedb.client.commands`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            from safedb.client import commands  # noqa: PLC0415

            self.add_command(getattr(commands, cmd_name))
        return super().get_command(ctx, cmd_name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click ends quietly when the reader of stdout goes away; any other failure to write what a command
        prints (a full disk, a closed terminal) ends in one line and exit status 1, not a traceback. So does any
        other system error no command caught, without blaming the output."""
        _reopen_closed_stdin()
        try:
            return super().main(*args, **kwargs)
        except OSError as exc:
            message = output_failure(exc) if exc.errno in _OUTPUT_ERRORS else str(exc)
            abandon_stdout()
            with contextlib.suppress(OSError):
                click.echo(f"Error: {message}", err=True)
            sys.exit(1)


# What writing to a full disk, a closed terminal or a file too large raises (the reader of a pipe going away,
# BrokenPipeError, click handles itself).
_OUTPUT_ERRORS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EBADF", "ENXIO") if hasattr(errno, name)
)


def _reopen_closed_stdin() -> None:
    """Standard input closed when safedb started (`safedb serve --transport stdio <&-`) is None to Python, which every
    use of it turned into an AttributeError traceback: it reads as empty instead, as the null device does (so `serve`
    over stdio and the client see the end of their input at once)."""
    if sys.stdin is not None:
        return
    opened = os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: 0 itself
    if opened != 0:
        os.dup2(opened, 0)
        os.close(opened)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115


@click.group(cls=SafeDBCommands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="safedb")
def main() -> None:
    """SafeDB: let AI agents use a real database through MCP, asking a person before anything changes."""


@main.command(short_help="Serve databases over MCP, asking before changes.")
@click.option(
    "--config", "-c", type=click.Path(dir_okay=False, path_type=Path), envvar="SAFEDB_CONFIG", cls=VariableOption,
    help="TOML configuration file with named targets and their policies (docs/configuration.md).",
)  # fmt: skip
@click.option(
    "--database", "-d", envvar="SAFEDB_DATABASE", cls=VariableOption, metavar="PATH|URL",
    help="SQLite database file or postgresql:// URL to serve (for PostgreSQL, a read-only role; see "
    "docs/postgres.md). Default: the demo database, created on first run.",
)  # fmt: skip
@click.option(
    "--writer-database", envvar="SAFEDB_WRITER_DATABASE", cls=VariableOption, metavar="URL",
    help="PostgreSQL only: URL of the role that runs approved statements. Default: the --database URL.",
)  # fmt: skip
@click.option(
    "--transport", type=click.Choice([t.value for t in Transport]), default="http", show_default=True,
    envvar="SAFEDB_TRANSPORT", cls=VariableOption,
    help="http: Streamable HTTP at http://HOST:PORT/mcp. stdio: speak MCP on stdin/stdout.",
)  # fmt: skip
@click.option(
    "--host", default="127.0.0.1", show_default=True, envvar="SAFEDB_HOST", cls=VariableOption,
    help="HTTP address to listen on.",
)  # fmt: skip
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, envvar="SAFEDB_PORT",
    cls=VariableOption, help="HTTP port to listen on; 0 picks a free one.",
)  # fmt: skip
@click.option(
    "--max-rows", type=click.IntRange(min=1), default=500, show_default=True, envvar="SAFEDB_MAX_ROWS",
    cls=VariableOption, help="Most rows one query returns; more are cut off and the result says truncated=true.",
)  # fmt: skip
@click.option(
    "--max-result-bytes", type=click.IntRange(min=1024), default=512 * 1024, show_default=True,
    envvar="SAFEDB_MAX_RESULT_BYTES", cls=VariableOption, help="About how many bytes of values one query returns.",
)  # fmt: skip
@click.option(
    "--statement-timeout", type=Seconds(min=0.1), default=30.0, show_default=True,
    envvar="SAFEDB_STATEMENT_TIMEOUT", cls=VariableOption, help="Seconds a statement may run before it is stopped.",
)  # fmt: skip
@click.option(
    "--approval-timeout", type=Seconds(min=1), default=600.0, show_default=True,
    envvar="SAFEDB_APPROVAL_TIMEOUT", cls=VariableOption,
    help="Seconds to wait for a person to answer; unanswered questions count as cancelled and nothing runs.",
)  # fmt: skip
@click.option(
    "--allow-path", "allowed_paths", multiple=True, envvar="SAFEDB_ALLOWED_PATHS", cls=VariableOption,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory that ATTACH and VACUUM INTO may use (repeatable; in the variable, separated by "
    f"'{os.pathsep}'). Outside these they are refused.",
)  # fmt: skip
@click.option(
    "--request-state-key", "request_state_keys", multiple=True, envvar="SAFEDB_REQUEST_STATE_KEYS",
    cls=VariableOption, metavar="SECRET",
    help="Secret (32+ bytes) sealing 2026-07-28 requestState; repeat to rotate (the first seals). Processes "
    "sharing the keys and the audit log can finish each other's approval rounds (in the variable, separated by "
    "spaces). Default: a per-process key.",
)  # fmt: skip
@click.option(
    "--audit-db", envvar="SAFEDB_AUDIT_DB", cls=VariableOption, metavar="PATH|URL",
    help="The audit log: an SQLite file (created if missing) or a postgresql:// URL (a dedicated schema, "
    "see docs/audit.md). Default: audit.db in the data directory.",
)  # fmt: skip
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), envvar="SAFEDB_DATA_DIR", cls=VariableOption,
    help=f"Where the demo database and, by default, the audit log live. Default: {default_data_dir()}",
)  # fmt: skip
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True,
    envvar="SAFEDB_LOG_LEVEL", cls=VariableOption, help="What the server logs on stderr.",
)  # fmt: skip
@click.pass_context
def serve(ctx: click.Context, /, config: Path | None, log_level: str, **options: Any) -> None:
    """Serve databases over MCP (Streamable HTTP by default, or stdio).

    Read-only SQL runs at once; anything that could change the database asks the person at the client
    first, through MCP elicitation. Without --config, one database is served (--database, or the demo
    database); with --config, the targets of the file, each with its policy (see docs/configuration.md).
    """
    _configure_logging(log_level)
    keys = options["request_state_keys"]
    if any(len(key.encode()) < MIN_STATE_KEY_BYTES for key in keys):
        raise click.BadParameter(
            f"each key must be at least {MIN_STATE_KEY_BYTES} bytes", param_hint="--request-state-key"
        )
    given = frozenset(
        name
        for name in options
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    )
    try:
        settings = launch.settings_for(config, options, given)
        launch.run(settings, lambda line: click.echo(line, err=True))
    except (SafeDBError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


@main.command("approver-hash", short_help="Print an approver's password hash, for server.approvers.")
@click.option(
    "--password",
    help="Otherwise asked in the terminal (hidden, twice), or read from standard input (one line) when that is "
    "not a terminal (`safedb approver-hash < file`). On the command line other users can see it (ps).",
)
def approver_hash(password: str | None) -> None:
    """Print the password hash of an approver, for `server.approvers` in the configuration file."""
    if password is None:
        if sys.stdin is not None and sys.stdin.isatty():
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        else:
            password = _password_from_stdin()
    if not is_utf8(password):
        raise click.BadParameter("the password is not UTF-8 text.", param_hint="--password")
    if not password:
        raise click.BadParameter("the password is empty.", param_hint="--password")
    click.echo(hash_password(password))


def _password_from_stdin() -> str:
    """The first line of standard input, without its line break."""
    line = sys.stdin.buffer.readline() if sys.stdin is not None else b""
    if not line.strip(b"\r\n"):
        raise click.UsageError(
            "No password on standard input: run approver-hash in a terminal, give it one line on standard input, "
            "or use --password."
        )
    try:
        return line.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise click.UsageError("The password on standard input is not UTF-8 text.") from None


main.add_command(audit_commands)
