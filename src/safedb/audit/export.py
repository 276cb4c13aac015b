"""Exporting records as JSON Lines: one object per line, keys in a fixed order, the hash last."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any, TextIO

from safedb.audit.records import AuditRecord

_NOT_PRINTABLE_ASCII = re.compile(r"[^\n\x20-\x7e]")


def record_line(record: AuditRecord) -> str:
    """One record as one line of JSON (no newline); keys in record order, so lines compare as text."""
    return visible_json(record.to_dict(), separators=(",", ":"))


def visible_json(value: Any, **options: Any) -> str:
    """`value` as JSON (`options` as for `json.dumps`) that is safe to print on a terminal and reads back exactly.

    Clients write the SQL, their names and justifications: json.dumps escapes the C0 controls (ESC) but writes DEL,
    the C1 controls (U+009B is an 8-bit CSI to many terminals), bidi and other format characters and line
    separators as they are, which could rewrite the auditor's screen or reorder what a line shows. Those are written
    as `\\u` escapes, as JSON allows inside any string; other text (`café`, `日本`) stays readable.
    """
    return _NOT_PRINTABLE_ASCII.sub(_escape_unless_visible, json.dumps(value, ensure_ascii=False, **options))


def _escape_unless_visible(found: re.Match[str]) -> str:
    # Outside ASCII, json.dumps writes characters only inside strings, so an escape is valid wherever one is found.
    character = found[0]
    if unicodedata.category(character)[0] not in "CZ":
        return character
    return json.dumps(character)[1:-1]  # ensure_ascii: \uXXXX, as a surrogate pair beyond the BMP


def write_jsonl(records: Iterable[AuditRecord], stream: TextIO) -> int:
    """Write one line per record; returns how many were written."""
    count = 0
    for record in records:
        stream.write(record_line(record) + "\n")
        count += 1
    return count
