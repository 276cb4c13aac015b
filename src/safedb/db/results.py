"""Reading rows out of a DB-API cursor within the row and byte caps."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Sequence
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
        row = tuple(self._to_value(value) for value in raw)
        self.size += _size(row)
        if len(self.rows) >= self.limits.max_rows or self.size > self.limits.max_bytes:
            self.truncated = True
            return False
        self.rows.append(row)
        return True

    def result(self) -> ResultSet:
        return ResultSet(columns=self.columns, rows=tuple(self.rows), truncated=self.truncated)


def fetch_capped(cursor: RowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch at most `limits.max_rows` rows and about `limits.max_bytes` bytes of values."""
    capped = CappedRows(columns, limits)
    while batch := cursor.fetchmany(_BATCH):
        if not all(capped.add(raw) for raw in batch):
            break
    return capped.result()
