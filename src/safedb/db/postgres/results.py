"""Reading rows from a psycopg cursor within the row and byte caps, as JSON-ready values."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from safedb.db.backend import QueryLimits, ResultSet, Value
from safedb.db.results import json_value

_BATCH = 256


class AsyncRowSource(Protocol):
    async def fetchmany(self, size: int = ...) -> Sequence[Sequence[Any]]: ...


def pg_value(value: object) -> Value:
    """A cell as a JSON-ready value: numbers and text as they are, bytea as base64, the rest as text."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return json_value(value)


def _size(row: Sequence[Value]) -> int:
    total = 0
    for value in row:
        if isinstance(value, str):
            total += len(value) + 2
        elif isinstance(value, dict):
            total += sum(len(item) for item in value.values()) + 14
        else:
            total += 8
    return total


class CappedRows:
    """Collects rows up to `limits.max_rows` rows and about `limits.max_bytes` bytes; past that, truncated."""

    def __init__(self, columns: Sequence[str], limits: QueryLimits) -> None:
        self.columns = tuple(columns)
        self.limits = limits
        self.rows: list[tuple[Value, ...]] = []
        self.size = 0
        self.truncated = False

    def add(self, raw: Sequence[Any]) -> bool:
        """Keep one row; False once the caps are reached (the row is then left out)."""
        if self.truncated:
            return False
        row = tuple(pg_value(value) for value in raw)
        self.size += _size(row)
        if len(self.rows) >= self.limits.max_rows or self.size > self.limits.max_bytes:
            self.truncated = True
            return False
        self.rows.append(row)
        return True

    def result(self) -> ResultSet:
        return ResultSet(columns=self.columns, rows=tuple(self.rows), truncated=self.truncated)


async def fetch_capped(cursor: AsyncRowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch batches until the caps are reached; the rest is never fetched (a server-side cursor keeps it)."""
    capped = CappedRows(columns, limits)
    while True:
        batch = await cursor.fetchmany(_BATCH)
        if not batch:
            break
        if not all(capped.add(raw) for raw in batch):
            break
    return capped.result()
