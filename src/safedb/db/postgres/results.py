"""Reading rows from a psycopg cursor within the row and byte caps, as JSON-ready values.

A read's rows come through `size_guarded`: PostgreSQL sends whole rows (libpq holds a fetched batch in
memory, every value whole), so a cap applied after fetching would let one read of large values take
gigabytes of the server's memory. The guard keeps a running total of the text the rows send and leaves
out every value past it, in PostgreSQL.
"""

from __future__ import annotations

import datetime
import decimal
import json
import secrets
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import psycopg

from safedb.db.backend import QueryLimits, ResultSet, Value
from safedb.db.postgres.connections import Connection
from safedb.db.results import CappedRows, json_value
from safedb.sql.postgres_classifier import PostgresStatement

_BATCH = 256

SERVER_BUDGET_FACTOR = 4
"""The guard's budget, in characters of the rows' text, per byte of `max_bytes`. SafeDB counts a value by
its JSON-ready form (`CappedRows`), which is never less than a quarter of its text inside a row (quotes
doubled, bytea as hex, numbers counted 8): so the guard stops a read only after the byte cap would have."""


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


def size_guarded(select: str, limits: QueryLimits) -> str:
    """`select` (one SELECT, VALUES or TABLE statement) with one more column, last: true from the first row
    whose running total of row text passes the budget on, and every value of those rows NULL.

    The rows come through a whole-row reference, so the columns keep their names and types; its alias is
    random, so that no column of the statement's own (a table's column, say) can take its place.
    """
    row = f"safedb_row_{secrets.token_hex(8)}"
    budget = SERVER_BUDGET_FACTOR * limits.max_bytes
    return (
        f"SELECT safedb_kept.*, safedb_guard.over_budget FROM ("
        f"SELECT {row} AS whole_row, pg_catalog.sum(pg_catalog.length(pg_catalog.concat({row}.*))) "
        f"OVER (ROWS UNBOUNDED PRECEDING) OPERATOR(pg_catalog.>) {budget} AS over_budget "
        # Newlines: a statement may end in a `--` comment.
        f"FROM (\n{select}\n) AS {row}) AS safedb_guard "
        "LEFT JOIN LATERAL (SELECT (safedb_guard.whole_row).* WHERE NOT safedb_guard.over_budget) AS safedb_kept "
        "ON true"
    )


async def fetch_guarded(cursor: AsyncRowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    """Fetch batches from a server-side cursor on `size_guarded(...)` until the caps are reached (the rest is
    never fetched); a row past the guard's budget ends the result, truncated. `columns` leaves out the
    guard's own."""
    capped = CappedRows(columns, limits, pg_value)
    while batch := await cursor.fetchmany(_BATCH):
        for raw in batch:
            if raw[-1]:
                capped.truncated = True
                return capped.result()
            if not capped.add(raw[:-1]):
                return capped.result()
    return capped.result()


async def fetch_row_by_row(
    cursor: psycopg.AsyncServerCursor[Any], columns: Sequence[str], limits: QueryLimits
) -> ResultSet:
    """Fetch from a server-side cursor without the size guard (for results too wide for its column), a row at
    a time: no more than one row is ever held past the caps."""
    capped = CappedRows(columns, limits, pg_value)
    while (raw := await cursor.fetchone()) is not None:
        if not capped.add(raw):
            break
    return capped.result()


async def _fetch_capped(cursor: AsyncRowSource, columns: Sequence[str], limits: QueryLimits) -> ResultSet:
    capped = CappedRows(columns, limits, pg_value)
    while batch := await cursor.fetchmany(_BATCH):
        if not all(capped.add(raw) for raw in batch):
            break
    return capped.result()


async def streamed(cursor: psycopg.AsyncCursor[Any], text: str, limits: QueryLimits) -> tuple[int, ResultSet]:
    """Run a statement that returns rows a row at a time: rows past the caps are read and dropped, where libpq
    would hold all of them at once. Returns how many rows came back, and those kept (without columns when
    there were none: `stream()` describes them only along with a row)."""
    capped: CappedRows | None = None
    count = 0
    async for raw in cursor.stream(text):
        if capped is None:
            capped = CappedRows([column.name for column in cursor.description or ()], limits, pg_value)
        capped.add(raw)
        count += 1
    return count, capped.result() if capped is not None else ResultSet(columns=(), rows=(), truncated=False)


async def run_counted(
    connection: Connection, statement: PostgresStatement, limits: QueryLimits
) -> tuple[int, ResultSet | None]:
    """Run a statement that cannot go through a server-side cursor (it changes something): PostgreSQL's row
    count, and the rows it returns kept within the caps (None when it returns none).

    One that `returns_rows` (RETURNING, a SELECT over a data-modifying WITH) runs `streamed`, and its count
    is the rows that came back, which for a data change is the rows it changed; any other in pipeline mode,
    with the few rows it may return (EXPLAIN, CALL with OUT parameters).
    """
    cursor = connection.cursor()
    if statement.returns_rows:
        return await streamed(cursor, statement.text, limits)
    async with connection.pipeline():
        await cursor.execute(statement.text)
    if not cursor.description:
        return cursor.rowcount, None
    return cursor.rowcount, await _fetch_capped(cursor, [column.name for column in cursor.description], limits)
