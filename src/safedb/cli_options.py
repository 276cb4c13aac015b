"""Command-line options that name their SAFEDB_* variable in --help, not in error messages."""

from __future__ import annotations

from typing import Any

import click


class VariableOption(click.Option):
    """An option settable through an environment variable, which `--help` names (not every name follows from the
    option's: `--allow-path` is `SAFEDB_ALLOWED_PATHS`). An invalid value is reported as click reports any option,
    `Invalid value for '--port'`, without the variable, which would suggest it was set there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["show_envvar"] = True
        super().__init__(*args, **kwargs)

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return click.Parameter.get_error_hint(self, ctx)
