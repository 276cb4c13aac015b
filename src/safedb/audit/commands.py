"""`safedb audit`: list, verify and export the audit log. Commands parse their options and delegate.

Exit codes: 0 success (for `verify` and `init`: the log is intact), 1 `verify` found tampering, 2 the log could
not be read (missing file or schema, unreachable server, not an audit log, unreadable record) or an option
was invalid. `--audit-db` is an SQLite file path or a postgresql:// URL (see `safedb.audit.open`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from safedb.approval.display import visible_statement
from safedb.audit.events import AuditDecision
from safedb.audit.export import write_jsonl
from safedb.audit.open import is_postgres_url, open_audit_store
from safedb.audit.records import AuditRecord, parse_time
from safedb.audit.sqlite_store import default_audit_path
from safedb.audit.store import AuditQuery, AuditStore
from safedb.audit.verification import verify
from safedb.errors import SafeDBError

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


def _audit_db_option(command: F) -> F:
    return click.option(
        "--audit-db", metavar="PATH|URL", envvar="SAFEDB_AUDIT_DB",
        help=f"The audit log: an SQLite file, or a postgresql:// URL (the schema in ?audit_schema=, default "
        f"safedb_audit). Default: {default_audit_path()}",
    )(command)  # fmt: skip


def _filter_options(command: F) -> F:
    options = [
        click.option("--target", help="Only records about this database (as the server names it)."),
        click.option(
            "--decision",
            "decisions",
            multiple=True,
            type=click.Choice([d.value for d in AuditDecision]),
            help="Only records with this decision (repeatable).",
        ),
        click.option("--request", "request_id", help="Only the records of one tool call (its request id)."),
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
def _opened(audit_db: str | None) -> Iterator[AuditStore]:
    """The audit log, read-only; any SafeDB error (also while reading) ends the command with one line."""
    try:
        with open_audit_store(audit_db or default_audit_path(), readonly=True) as store:
            yield store
    except SafeDBError as exc:
        raise AuditUnavailable(str(exc)) from None


@contextmanager
def _pipe_safe() -> Iterator[None]:
    """End quietly when the reader of stdout goes away (`safedb audit export | head`)."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


@click.group("audit")
def audit_commands() -> None:
    """Read, check and export the audit log of approval decisions."""


@audit_commands.command("init")
@_audit_db_option
def init_log(audit_db: str | None) -> None:
    """Create the audit log (an SQLite file, or the schema and tables in PostgreSQL) if it does not exist.

    For PostgreSQL, run it as the role that should own the schema; then grant SafeDB's role what
    docs/audit.md lists, so that the server cannot drop the triggers that keep the log append-only.
    """
    try:
        with open_audit_store(audit_db or default_audit_path()) as store:
            report = verify(store)
    except SafeDBError as exc:
        raise AuditUnavailable(str(exc)) from None
    click.echo(f"Audit log ready. {report.summary()}")
    if not report.intact:
        sys.exit(1)


@audit_commands.command("list")
@_audit_db_option
@_filter_options
@click.option(
    "--limit", type=click.IntRange(min=0), default=100, show_default=True,
    help="Show the most recent N matching records (0: all of them), oldest first.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON array.")
def list_records(
    audit_db: str | None,
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
    with _opened(audit_db) as store, _pipe_safe():
        records = list(store.records(query))
        if as_json:
            click.echo(json.dumps([record.to_dict() for record in records], ensure_ascii=False, indent=2))
        elif not records:
            click.echo("No audit records match.", err=True)
        else:
            for line in _table(records):
                click.echo(line)


@audit_commands.command("verify")
@_audit_db_option
def verify_log(audit_db: str | None) -> None:
    """Check the hash chain; exit 1 naming the first edited, deleted or inserted record."""
    with _opened(audit_db) as store:
        report = verify(store)
    click.echo(report.summary())
    if not report.intact:
        sys.exit(1)


@audit_commands.command("export")
@_audit_db_option
@_filter_options
@click.option(
    "--format", "format_", type=click.Choice(["jsonl"]), default="jsonl", show_default=True,
    help="jsonl: one JSON object per line, keys in a fixed order.",
)  # fmt: skip
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout."
)
def export_records(
    audit_db: str | None,
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
    location = audit_db or default_audit_path()
    if output is not None and _is_the_log(output, location):
        raise AuditUnavailable(f"{output} is the audit log (or one of its files): export writes over its output.")
    with _opened(audit_db) as store:
        if output is None:
            with _pipe_safe():
                write_jsonl(store.records(query), sys.stdout)
                sys.stdout.flush()
            return
        try:
            with output.open("w", encoding="utf-8") as stream:
                count = write_jsonl(store.records(query), stream)
        except OSError as exc:
            raise AuditUnavailable(f"Cannot write {output}: {exc.strerror}") from None
        click.echo(f"Exported {count} record{'' if count == 1 else 's'} to {output}.", err=True)


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


def _table(records: list[AuditRecord]) -> Iterator[str]:
    header = ("SEQ", "TIME", "DECISION", "TARGET", "CALLER", "ROWS", "SQL")
    rows = [
        (
            str(record.seq),
            record.time,
            record.decision.value,
            _visible(record.target),
            _visible(record.caller) or "-",
            "-" if record.rows_affected is None else str(record.rows_affected),
            _one_line(visible_statement(record.sql)),
        )
        for record in records
    ]
    widths = [max(len(row[index]) for row in [header, *rows]) for index in range(len(header) - 1)]
    for row in [header, *rows]:
        yield "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])


def _visible(text: str | None) -> str:
    """A client's text (its name, a target) on one line, with nothing hiding: it must not forge a row of the
    listing (a line break) or rewrite the auditor's terminal (escape sequences, backspaces)."""
    shown = visible_statement(text or "")
    return shown.replace("\n", "⟨U+000A⟩").replace("\t", "⟨U+0009⟩")


def _one_line(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= _SQL_WIDTH else text[: _SQL_WIDTH - 1] + "…"
