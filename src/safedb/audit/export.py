"""Exporting records as JSON Lines: one object per line, keys in a fixed order, the hash last."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from safedb.audit.records import AuditRecord
from safedb.terminal_json import visible_json


def record_line(record: AuditRecord) -> str:
    """One record as one line of JSON (no newline); keys in record order, so lines compare as text."""
    return visible_json(record.to_dict(), separators=(",", ":"))


def write_jsonl(records: Iterable[AuditRecord], stream: TextIO) -> int:
    """Write one line per record; returns how many were written."""
    count = 0
    for record in records:
        stream.write(record_line(record) + "\n")
        count += 1
    return count
