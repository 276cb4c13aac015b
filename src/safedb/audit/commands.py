"""`safedb audit`: list, verify and export the audit log. Commands parse their options and delegate.

Exit codes: 0 success (for `verify` and `init`: the log is intact), 1 `verify` found tampering, 2 the log could
not be read (missing file or schema, unreachable server, not an audit log, unreadable record) or an option
was invalid. `--audit-db` is an SQLite file path or a postgresql:// URL (see `safedb.audit.open`).
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from safedb.approval.display import visible_statement
from safedb.audit.events import AuditDecision
from safedb.audit.export import write_jsonl
from safedb.audit.open import is_postgres_url, open_audit_store
from safedb.audit.records import AuditRecord, parse_time
from safedb.audit.store import AuditQuery, AuditStore
from safedb.audit.verification import verify
from safedb.cli_options import VariableOption, abandon_stdout, is_utf8, output_failure
from safedb.config_file import load_settings
from safedb.errors import ConfigurationError, SafeDBError
from safedb.settings import Settings, default_data_dir
from safedb.terminal_json import visible_json

F = TypeVar("F", bound=Callable[..., Any])

_SQL_WIDTH = 80


class AuditUnavailable(click.ClickException):
    exit_code = 2


def _time_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or time (e.g. 2025-06-01T12:00Z)") from None
    except OverflowError:  # its zone moves it past year 9999 or before year 1 in UTC
        raise click.BadParameter(f"{value!r} is out of range: in UTC it falls outside the years 1 to 9999") from None


def _text_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A filter's text, refused when it is not UTF-8: a shell passes any bytes (Python holds the others as lone
    surrogates), which neither SQLite nor PostgreSQL can be given, and no stored record holds."""
    if value is not None and not is_utf8(value):
        raise click.BadParameter(f"{value!r} is not UTF-8 text")
    return value


def _audit_db_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A postgresql:// URL must be UTF-8 text to reach libpq; a file path may be any bytes the file system takes."""
    if value is not None and is_postgres_url(value) and not is_utf8(value):
        raise click.BadParameter("the postgresql:// URL is not UTF-8 text")
    return value


def _log_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--audit-db`, `--config` and `--data-dir`, found as `safedb serve` finds them, given to `command` as the
    log's `location`: a server given a data directory or a configuration file keeps its log there, and a
    command that looked elsewhere would report on another log (or create one)."""

    @functools.wraps(command)
    def with_location(
        *args: Any, audit_db: str | None, config: Path | None, data_dir: Path | None, **kwargs: Any
    ) -> Any:
        return command(*args, location=_location(audit_db, config, data_dir), **kwargs)

    options = [
        click.option(
            "--audit-db", metavar="PATH|URL", envvar="SAFEDB_AUDIT_DB", cls=VariableOption, callback=_audit_db_option,
            help="The audit log: an SQLite file, or a postgresql:// URL (the schema in ?audit_schema=, default "
            "safedb_audit). Default: the configuration file's server.audit_db, else audit.db in the data directory.",
        ),
        click.option(
            "--config", "-c", type=click.Path(dir_okay=False, path_type=Path), envvar="SAFEDB_CONFIG",
            cls=VariableOption, help="The server's TOML configuration file, to find its audit log.",
        ),
        click.option(
            "--data-dir", type=click.Path(file_okay=False, path_type=Path), envvar="SAFEDB_DATA_DIR",
            cls=VariableOption, help=f"The server's data directory. Default: {default_data_dir()}",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        with_location = option(with_location)
    return with_location


def _location(audit_db: str | None, config: Path | None, data_dir: Path | None) -> str | Path:
    """Where the server with these settings keeps its audit log (its own options override its file, as there)."""
    if audit_db:
        return audit_db
    try:
        settings = load_settings(config) if config is not None else Settings()
    except ConfigurationError as exc:
        raise AuditUnavailable(str(exc)) from None
    return settings.audit_location if data_dir is None else replace(settings, data_dir=data_dir).audit_location


def _filter_options(command: F) -> F:
    options = [
        click.option(
            "--target", callback=_text_option, help="Only records about this database (as the server names it)."
        ),
        click.option(
            "--decision",
            "decisions",
            multiple=True,
            type=click.Choice([d.value for d in AuditDecision]),
            help="Only records with this decision (repeatable).",
        ),
        click.option(
            "--request", "request_id", callback=_text_option, help="Only the records of one tool call (its request id)."
        ),
        click.option(
            "--since",
            callback=_time_option,
            help="Only records at or after this time (ISO 8601; UTC unless a zone is given).",
        ),
        click.option(
            "--until",
            callback=_time_option,
            help="Only records before this time (ISO 8601; UTC unless a zone is given).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _query(
    target: str | None,
    decisions: tuple[str, ...],
    request_id: str | None,
    since: str | None,
    until: str | None,
    limit: int | None = None,
) -> AuditQuery:
    return AuditQuery(
        target=target,
        decisions=tuple(AuditDecision(decision) for decision in decisions),
        request_id=request_id,
        since=since,
        until=until,
        limit=limit,
    )


@contextmanager
def _opened(location: str | Path) -> Iterator[AuditStore]:
    """The audit log, read-only; any SafeDB error (also while reading) ends the command with one line."""
    try:
        with open_audit_store(location, readonly=True) as store:
            yield store
    except SafeDBError as exc:
        raise AuditUnavailable(str(exc)) from None


@contextmanager
def _pipe_safe() -> Iterator[None]:
    """Stop writing quietly when the reader of stdout goes away (`safedb audit export | head`), and let the command
    end with its own exit status (`verify`'s verdict stands); when stdout cannot be written otherwise (a full disk),
    end with one line and exit status 2, never 1, which `verify` keeps for tampering."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        abandon_stdout()
    except OSError as exc:
        abandon_stdout()
        raise AuditUnavailable(output_failure(exc)) from None


@click.group("audit")
def audit_commands() -> None:
    """Read, check and export the audit log of approval decisions."""


@audit_commands.command("init")
@_log_options
def init_log(location: str | Path) -> None:
    """Create the audit log (an SQLite file, or the schema and tables in PostgreSQL) if it does not exist.

    For PostgreSQL, run it as the role that should own the schema; then grant SafeDB's role what
    docs/audit.md lists, so that the server cannot drop the triggers that keep the log append-only.
    """
    try:
        with open_audit_store(location) as store:
            report = verify(store)
    except SafeDBError as exc:
        raise AuditUnavailable(str(exc)) from None
    with _pipe_safe():
        # "ready" only where it is: a log that fails verification is in place, but not one to rely on.
        click.echo(f"Audit log ready. {report.summary()}" if report.intact else report.summary())
    if not report.intact:
        sys.exit(1)


@audit_commands.command("list")
@_log_options
@_filter_options
@click.option(
    "--limit", type=click.IntRange(min=0, max=2**63 - 1), default=100, show_default=True,
    help="Show the most recent N matching records (0: all of them), oldest first.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON array.")
def list_records(
    location: str | Path,
    target: str | None,
    decisions: tuple[str, ...],
    request_id: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List audit records, oldest first."""
    query = _query(target, decisions, request_id, since, until, limit or None)
    with _opened(location) as store, _pipe_safe():
        records = store.records(query)
        if as_json:
            for piece in _json_array(record.to_dict() for record in records):
                click.echo(piece, nl=False)
            click.echo()
            return
        # Only each record's short row is kept for the column widths: `--limit 0` on a large log.
        rows = [_row(record) for record in records]
        if not rows:
            click.echo("No audit records match.", err=True)
        for line in _table(rows):
            click.echo(line)


@audit_commands.command("verify")
@_log_options
def verify_log(location: str | Path) -> None:
    """Check the hash chain; exit 1 naming the first edited, deleted or inserted record, or an answer to a question
    the log does not hold."""
    with _opened(location) as store:
        report = verify(store)
    with _pipe_safe():
        click.echo(report.summary())
    if not report.intact:
        sys.exit(1)


@audit_commands.command("export")
@_log_options
@_filter_options
@click.option(
    "--format", "format_", type=click.Choice(["jsonl"]), default="jsonl", show_default=True,
    help="jsonl: one JSON object per line, keys in a fixed order.",
)  # fmt: skip
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout."
)
def export_records(
    location: str | Path,
    target: str | None,
    decisions: tuple[str, ...],
    request_id: str | None,
    since: str | None,
    until: str | None,
    format_: str,
    output: Path | None,
) -> None:
    """Export audit records, oldest first, with their hashes."""
    query = _query(target, decisions, request_id, since, until)
    if output is not None and _is_the_log(output, location):
        raise AuditUnavailable(f"{output} is the audit log (or one of its files): export writes over its output.")
    with _opened(location) as store:
        if output is None:
            with _pipe_safe():
                write_jsonl(store.records(query), sys.stdout)
            return
        try:
            count = _export_to(output, store.records(query))
        except OSError as exc:
            raise AuditUnavailable(f"Cannot write {output}: {exc.strerror}") from None
        click.echo(f"Exported {count} record{'' if count == 1 else 's'} to {output}.", err=True)


def _export_to(output: Path, records: Iterable[AuditRecord]) -> int:
    """Write the export to a new file beside `output` and rename it over `output` once complete, so that an export
    that fails part-way (a record that cannot be read, a full disk) leaves no partial file, and an earlier export
    at that name as it was. The file is readable by its owner only, as the log (it holds the same SQL text); an
    existing file keeps its permissions. A pipe, a device or a symbolic link (`-o /dev/stdout`) is written through."""
    if output.is_symlink() or (output.exists() and not output.is_file()):
        with output.open("w", encoding="utf-8") as stream:
            return write_jsonl(records, stream)
    mode = stat.S_IMODE(output.stat().st_mode) if output.exists() else 0o600
    handle, name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".partial")
    partial = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            count = write_jsonl(records, stream)
            stream.flush()
            os.fsync(stream.fileno())
        partial.chmod(mode)
        partial.replace(output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return count


def _is_the_log(output: Path, location: str | Path) -> bool:
    """Whether `output` is the SQLite audit log's file, or its WAL, shared-memory or journal file (by any name
    or link), which writing the export over would destroy."""
    if is_postgres_url(location):
        return False
    log = Path(location)
    for part in (log, *(log.with_name(log.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        try:
            if output.resolve() == part.resolve() or (output.exists() and part.exists() and output.samefile(part)):
                return True
        except OSError:  # a name that cannot be resolved names no file of the log
            continue
    return False


def _json_array(items: Iterable[Any]) -> Iterator[str]:
    """`visible_json(list(items), indent=2)` in pieces, one item at a time, so that no list is held."""
    first = True
    for item in items:
        # JSON text has line breaks only between its tokens (a string's are escaped): indent every line.
        yield ("[\n  " if first else ",\n  ") + visible_json(item, indent=2).replace("\n", "\n  ")
        first = False
    yield "[]" if first else "\n]"


_HEADER = ("SEQ", "TIME", "DECISION", "TARGET", "CALLER", "ROWS", "SQL")


def _row(record: AuditRecord) -> tuple[str, ...]:
    """A record's cells in the listing, under `_HEADER`."""
    return (
        str(record.seq),
        record.time,
        record.decision.value,
        _visible(record.target),
        _visible(record.caller) or "-",
        "-" if record.rows_affected is None else str(record.rows_affected),
        _one_line(visible_statement(record.sql)),
    )


def _table(rows: list[tuple[str, ...]]) -> Iterator[str]:
    """The listing's lines (none for no rows): the header, then a line per row, every column but the SQL padded."""
    if not rows:
        return
    widths = [max(len(row[index]) for row in [_HEADER, *rows]) for index in range(len(_HEADER) - 1)]
    for row in [_HEADER, *rows]:
        yield "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])


def _visible(text: str | None) -> str:
    """A client's text (its name, a target) on one line, with nothing hiding: it must not forge a row of the
    listing (a line break) or rewrite the auditor's terminal (escape sequences, backspaces)."""
    shown = visible_statement(text or "")
    return shown.replace("\n", "⟨U+000A⟩").replace("\t", "⟨U+0009⟩")


def _one_line(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= _SQL_WIDTH else text[: _SQL_WIDTH - 1] + "…"
