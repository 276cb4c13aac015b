"""Audit test helpers: one event of every kind, tampering with the file the way an intruder would, the CLI."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from safedb.audit import UNASKED_JUSTIFICATION, AuditDecision, AuditEvent, AuditRecord, SqliteAuditStore

if TYPE_CHECKING:
    from tests.audit.stores import AuditLog, LogConnection

TRIGGERS = (
    "audit_log_no_update",
    "audit_log_no_delete",
    "audit_log_append_at_end",
    "audit_head_forward_only",
    "audit_head_no_delete",
)


def event(decision: AuditDecision, index: int = 0, target: str = "demo") -> AuditEvent:
    """A distinct event: its request id, SQL and fields say which decision and index it is."""
    return AuditEvent(
        decision=decision,
        request_id=f"req-{index}",
        target=target,
        sql=f"DELETE FROM invoices WHERE id = {index}",
        caller="pytest-client/1.0",
        classification="data change (delete)",
        changes=("delete table invoices",),
        justification="cleanup of test rows" if decision is not AuditDecision.REQUESTED else None,
        environment="Development" if decision is not AuditDecision.REQUESTED else None,
        rows_affected=1 if decision is AuditDecision.EXECUTED else None,
        error="The database reported an error: disk I/O error" if decision is AuditDecision.FAILED else None,
    )


def accepted_unasked(index: int = 0) -> AuditEvent:
    """The `accepted` of a change the target's policy runs without asking: no `requested` record comes before it."""
    return replace(event(AuditDecision.ACCEPTED, index), justification=UNASKED_JUSTIFICATION, environment=None)


CALLS = (
    (AuditDecision.REQUESTED, AuditDecision.ACCEPTED, AuditDecision.EXECUTED),
    (AuditDecision.BLOCKED,),
    (AuditDecision.REFUSED,),
    (AuditDecision.REQUESTED, AuditDecision.DECLINED),
    (AuditDecision.REQUESTED, AuditDecision.CANCELLED),
    (AuditDecision.REQUESTED, AuditDecision.NOT_CONFIRMED),
    (AuditDecision.REQUESTED, AuditDecision.TIMED_OUT),
    (AuditDecision.REQUESTED, AuditDecision.ACCEPTED, AuditDecision.FAILED),
)
"""The records of tool calls of every kind, as SafeDB writes them: each answer after its question."""


def fill(log: Path | AuditLog, count: int) -> list[AuditRecord]:
    """An audit log (an SQLite file, or either store) with `count` records: the calls of `CALLS` in turn, call
    N's records with request id `req-N` (the last call cut short when `count` ends within it)."""
    calls = (event(decision, number) for number in itertools.count() for decision in CALLS[number % len(CALLS)])
    with SqliteAuditStore.open(log) if isinstance(log, Path) else log.open() as store:
        return [store.append(call) for call in itertools.islice(calls, count)]


@contextmanager
def tampering(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection of its own with the append-only triggers dropped; commits and closes on exit."""
    connection = sqlite3.connect(path)
    try:
        for trigger in TRIGGERS:
            connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        yield connection
        connection.commit()
    finally:
        connection.close()


def shift_seqs(connection: LogConnection, first: int, by: int) -> None:
    """Renumber records `first`.. by `by`, without tripping the primary key half-way."""
    connection.execute("UPDATE audit_log SET seq = -seq WHERE seq >= ?", (first,))
    connection.execute("UPDATE audit_log SET seq = -seq + ? WHERE seq < 0", (by,))


def insert_row(connection: LogConnection, record: AuditRecord) -> None:
    row = record.content()
    row["changes"] = json.dumps(row["changes"])
    columns = ", ".join(f'"{name}"' for name in [*row, "hash"])
    marks = ", ".join("?" for _ in range(len(row) + 1))
    connection.execute(f"INSERT INTO audit_log ({columns}) VALUES ({marks})", [*row.values(), record.hash])


def run_audit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "SAFEDB_AUDIT_DB"}
    return subprocess.run(
        [sys.executable, "-m", "safedb", "audit", *args], capture_output=True, text=True, timeout=60, check=False,
        env={**environment, **(env or {})},
    )  # fmt: skip
