"""Queries SafeDB runs in every classification, prepared once in each reader's session.

PostgreSQL parses and plans a query each time it is sent, which for SafeDB's larger catalog queries costs more than
running them. A `ReaderStatement` is prepared in SQL (`PREPARE`) the first time a reader's session runs it, then
run with `EXECUTE`: not by psycopg, which deallocates its prepared statements whenever a transaction rolls back,
as every read's does. A reader's session runs only SafeDB's own queries and statements judged reads, which cannot
deallocate or replace a prepared statement: session statements such as DEALLOCATE are refused, and a call of a
function whose body runs one is not a read (approved, it runs as the writer). A writer's session is reset with
DISCARD ALL: there the query is sent as it is.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from typing import Any

from psycopg import sql
from psycopg.errors import InvalidSqlStatementName

from safedb.db.postgres.connections import Connection

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


class ReaderStatement:
    """`query` (with psycopg's `%(name)s` placeholders), prepared as `name` in each reader's session."""

    def __init__(self, name: str, query: str) -> None:
        self.name = name
        self.query = query
        self._prepared_query, self._parameters = _for_prepare(query)
        self._sessions_prepared: weakref.WeakSet[Connection] = weakref.WeakSet()

    async def rows(self, connection: Connection, parameters: Mapping[str, object]) -> list[tuple[Any, ...]]:
        if not connection.read_only:
            return await (await connection.execute(self.query, parameters)).fetchall()
        if connection not in self._sessions_prepared:
            # A call cancelled meanwhile closes the session (psycopg does), so what the server prepared is never
            # left unnoted in a session still in use.
            await connection.execute(
                sql.SQL("PREPARE {} AS ").format(sql.Identifier(self.name)) + sql.SQL(self._prepared_query)
            )
            self._sessions_prepared.add(connection)
        execute = sql.SQL("EXECUTE {}({})").format(
            sql.Identifier(self.name),
            sql.SQL(", ").join(sql.Literal(parameters[name]) for name in self._parameters),
        )
        try:
            return await (await connection.execute(execute)).fetchall()
        except InvalidSqlStatementName:
            self._sessions_prepared.discard(connection)  # deallocated after all: prepared again next time
            raise


def _for_prepare(query: str) -> tuple[str, list[str]]:
    """`query` with its psycopg placeholders written `$1, $2...` (and `%%` as `%`), and the names they stand for."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] is None:
            return "%"
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return _PLACEHOLDER.sub(number, query), names
