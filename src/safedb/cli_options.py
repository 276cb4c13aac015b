"""Command-line options that name their SAFEDB_* variable in --help, not in error messages; output that fails."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import click
from click.core import ParameterSource


class VariableOption(click.Option):
    """An option settable through an environment variable, which `--help` names (not every name follows from the
    option's: `--allow-path` is `SAFEDB_ALLOWED_PATHS`). An invalid value names the variable only when it came from
    there (`Invalid value for '--port' (from SAFEDB_PORT)`): naming it always would suggest it was set there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["show_envvar"] = True
        super().__init__(*args, **kwargs)

    def get_error_hint(self, ctx: click.Context | None) -> str:
        hint = click.Parameter.get_error_hint(self, ctx)
        if ctx is not None and self.name and ctx.get_parameter_source(self.name) is ParameterSource.ENVIRONMENT:
            hint += f" (from {self.envvar})"
        return hint

    def type_cast_value(self, ctx: click.Context, value: Any) -> Any:
        # An empty value means nothing here, yet each option took it as something of its own: `--data-dir ''` the
        # current directory, `--database ''` the demo database, `--audit-db ''` the default log.
        given = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(item, str) and not item for item in given):
            raise click.BadParameter("must not be empty", ctx=ctx, param=self)
        return super().type_cast_value(ctx, value)


def is_utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text: a command line, a terminal or a pipe may pass any bytes, which Python holds as
    lone surrogates (`\\udcff`) that no file, database or server can be given."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def output_failure(exc: OSError) -> str:
    """What could not be written, for an error that a command's output raised (`Cannot write the output: No space
    left on device`)."""
    what = exc.filename if exc.filename is not None else "the output"
    return f"Cannot write {what}: {exc.strerror or exc}"


def abandon_stdout() -> None:
    """Point stdout at the null device, so that Python's flush of what is still buffered, as it exits, does not fail
    a second time (and print an "Exception ignored" traceback)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
