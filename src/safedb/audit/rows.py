"""Between stored rows and records, for every store: the columns, the filters of a query, reading a row back."""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

from safedb.audit.chain import CONTENT_FIELDS
from safedb.audit.records import AuditRecord
from safedb.audit.store import AuditQuery, ChainEntry, UnnumberedEntry

COLUMNS = (*CONTENT_FIELDS, "hash")
"""The columns of `audit_log`, in order: the hashed fields, then the hash."""
SELECT_COLUMNS = ", ".join(f'"{name}"' for name in COLUMNS)


def stored_values(record: AuditRecord) -> list[Any]:
    """The record's values in column order, `changes` as JSON text."""
    row = record.content()
    row["changes"] = json.dumps(row["changes"], ensure_ascii=False)
    return [*row.values(), record.hash]


def query_filters(query: AuditQuery, mark: str) -> tuple[str, list[Any]]:
    """The `WHERE` clause (empty when nothing is filtered) and its parameters; `mark` is the placeholder."""
    conditions: list[str] = []
    parameters: list[Any] = []
    if query.target is not None:
        conditions.append(f"target = {mark}")
        parameters.append(query.target)
    if query.decisions:
        conditions.append(f"decision IN ({', '.join(mark for _ in query.decisions)})")
        parameters.extend(decision.value for decision in query.decisions)
    if query.request_id is not None:
        conditions.append(f"request_id = {mark}")
        parameters.append(query.request_id)
    if query.since is not None:
        conditions.append(f"time >= {mark}")
        parameters.append(query.since)
    if query.until is not None:
        conditions.append(f"time < {mark}")
        parameters.append(query.until)
    return (f"WHERE {' AND '.join(conditions)}" if conditions else ""), parameters


def record_from_row(row: tuple[Any, ...]) -> AuditRecord:
    """A stored row as a record; UnreadableRecord when a field has the wrong shape."""
    return AuditRecord.from_content(dict(zip(CONTENT_FIELDS, row, strict=False)), row[-1])


def entry_from_row(row: tuple[Any, ...]) -> ChainEntry | UnnumberedEntry:
    """A stored row as it is, for verification: no shape checks, so any alteration shows in the hash; only a
    sequence number that is no whole number, which leaves nothing to check the chain by, is told apart."""
    seq = row[0]
    if not isinstance(seq, int) or isinstance(seq, bool):
        return UnnumberedEntry(seq)
    content = dict(zip(CONTENT_FIELDS, row, strict=False))
    changes = content["changes"]
    if isinstance(changes, str):
        with suppress(ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python reads
            content["changes"] = json.loads(changes)
    return ChainEntry(seq=seq, content=content, prev_hash=hash_text(content["prev_hash"]), hash=hash_text(row[-1]))


def hash_text(value: object) -> str:
    return value if isinstance(value, str) else repr(value)
