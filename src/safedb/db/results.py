"""Reading rows out of a DB-API cursor within the row and byte caps."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from safedb.db.backend import QueryLimits, ResultSet, Value


def json_value(value: object) -> Value:
    """A cell as a JSON-ready value (BLOBs as base64, non-finite floats as text)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return str(value)


# What a BLOB counts beyond its base64 text: the `{"base64": ...}` wrapper.
_BLOB_OVERHEAD = 14


def _text_size(text: str, limit: int) -> int:
    """The bytes `text` takes as a JSON string (UTF-8, quotes and escapes included): a control character is
    six (`\\u0001`), an emoji four, so counting characters let a result of 500,000 of them be 3 MB. Text
    longer than `limit` is past it anyway, and is not encoded only to be left out."""
    if len(text) > limit:
        return len(text) + 2
    if text.isprintable() and '"' not in text and "\\" not in text:  # nothing to escape: the common case
        return (len(text) if text.isascii() else len(text.encode())) + 2
    return len(json.dumps(text, ensure_ascii=False).encode())


def _size(row: Iterable[Value], limit: int) -> int:
    total = 0
    for value in row:
        if isinstance(value, str):
            total += _text_size(value, limit)
        elif isinstance(value, dict):
            total += len(value["base64"]) + _BLOB_OVERHEAD
        else:
            total += 8
    return total


def _encoded_blob_size(raw: Sequence[Any]) -> int:
    """What the row's BLOBs will count once encoded (see `_size`), known before encoding them."""
    blobs = (value for value in raw if isinstance(value, bytes | bytearray | memoryview))
    return sum(4 * -(-len(blob) // 3) + _BLOB_OVERHEAD for blob in blobs)


class CappedRows:
    """Collects rows up to `limits.max_rows` rows and about `limits.max_bytes` bytes; past that, truncated.

    Each cell goes through `to_value` (the backend's conversion to a JSON-ready value) before it counts.
    """

    def __init__(
        self, columns: Sequence[str], limits: QueryLimits, to_value: Callable[[object], Value] = json_value
    ) -> None:
        self.columns = tuple(columns)
        self.limits = limits
        self._to_value = to_value
        self.rows: list[tuple[Value, ...]] = []
        self.size = 0
        self.truncated = False

    def add(self, raw: Sequence[Any]) -> bool:
        """Keep one row; False once the caps are reached (the row is then left out)."""
        if self.truncated:
            return False
        # A BLOB far past the cap is not encoded only to be left out.
        if len(self.rows) >= self.limits.max_rows or self.size + _encoded_blob_size(raw) > self.limits.max_bytes:
            self.truncated = True
            return False
        row = tuple(self._to_value(value) for value in raw)
        self.size += _size(row, self.limits.max_bytes)
        if self.size > self.limits.max_bytes:
            self.truncated = True
            return False
        self.rows.append(row)
        return True

    def result(self) -> ResultSet:
        return ResultSet(columns=self.columns, rows=tuple(self.rows), truncated=self.truncated)


def fetch_capped(cursor: Iterable[Sequence[Any]], columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch at most `limits.max_rows` rows and about `limits.max_bytes` bytes of values, one row at a time:
    no row past the caps is ever fetched (each one may hold large values)."""
    capped = CappedRows(columns, limits)
    for raw in cursor:
        if not capped.add(raw):
            break
    return capped.result()
