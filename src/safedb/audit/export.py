"""Exporting records as JSON Lines: one object per line, keys in a fixed order, the hash last."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TextIO

from safedb.audit.records import AuditRecord


def record_line(record: AuditRecord) -> str:
    """One record as one line of JSON (no newline); keys in record order, so lines compare as text."""
    return json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))


def write_jsonl(records: Iterable[AuditRecord], stream: TextIO) -> int:
    """Write one line per record; returns how many were written."""
    count = 0
    for record in records:
        stream.write(record_line(record) + "\n")
        count += 1
    return count
