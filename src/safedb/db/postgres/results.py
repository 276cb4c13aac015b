"""Reading rows from a psycopg cursor within the row and byte caps, as JSON-ready values."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from safedb.db.backend import QueryLimits, ResultSet, Value
from safedb.db.results import CappedRows, json_value

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


async def fetch_capped(cursor: AsyncRowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch batches until the caps are reached; the rest is never fetched (a server-side cursor keeps it)."""
    capped = CappedRows(columns, limits, pg_value)
    while True:
        batch = await cursor.fetchmany(_BATCH)
        if not batch:
            break
        if not all(capped.add(raw) for raw in batch):
            break
    return capped.result()
