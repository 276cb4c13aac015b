"""Reading rows out of a DB-API cursor within the row and byte caps."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from safedb.db.backend import QueryLimits, ResultSet, Value

_BATCH = 256


class RowSource(Protocol):
    def fetchmany(self, size: int = ...) -> Sequence[Sequence[Any]]: ...


def json_value(value: object) -> Value:
    """A cell as a JSON-ready value (BLOBs as base64, non-finite floats as text)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return str(value)


def _size(row: Iterable[Value]) -> int:
    total = 0
    for value in row:
        if isinstance(value, str):
            total += len(value) + 2
        elif isinstance(value, dict):
            total += len(value["base64"]) + 14
        else:
            total += 8
    return total


def fetch_capped(cursor: RowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch at most `limits.max_rows` rows and about `limits.max_bytes` bytes of values."""
    rows: list[tuple[Value, ...]] = []
    size = 0
    truncated = False
    while not truncated:
        batch = cursor.fetchmany(_BATCH)
        if not batch:
            break
        for raw in batch:
            row = tuple(json_value(value) for value in raw)
            size += _size(row)
            if len(rows) >= limits.max_rows or size > limits.max_bytes:
                truncated = True
                break
            rows.append(row)
    return ResultSet(columns=tuple(columns), rows=tuple(rows), truncated=truncated)
