"""Judging user-defined functions labelled immutable or stable by what their bodies call.

PostgreSQL refuses table writes from such functions, but nothing else: one labelled stable may still end
sessions (`pg_terminate_backend`), take advisory locks or reach another server (`dblink`), and a read would
run it without asking. So each one a read reaches has its body examined (`safedb.sql.postgres_bodies`),
and the calls, operators, casts and relations there are looked up and judged as a statement's are, in the
search path the function sets for itself, if any; the user-defined functions those reach are examined in
turn. A function is harmless when nothing it reaches, at any depth, is otherwise. A body that cannot be
examined (another language, SQL built at run time) is not harmless, and neither is one past
`MAX_EXAMINED` functions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TypeVar

from psycopg.pq import TransactionStatus

from safedb.db.postgres import catalog
from safedb.db.postgres.connections import Connection
from safedb.sql.classification import Change, ObjectType
from safedb.sql.postgres_bodies import Unexaminable, body_statements
from safedb.sql.postgres_functions import CatalogFunction, function_changes, reached_functions

T = TypeVar("T")

MAX_EXAMINED = 64
"""The most function bodies examined for one statement; a read reaching more asks."""


async def judged(connection: Connection, rows: list[CatalogFunction]) -> list[CatalogFunction]:
    """`rows` (from `catalog.function_facts`), each user-defined function labelled immutable or stable marked
    with why it is not harmless (`CatalogFunction.body`) when its body shows it is not. Runs inside the
    caller's read-only transaction, which has called `catalog.without_jit`."""
    examined = {row.oid for row in rows if row.judged_by_body}
    if not examined:
        return rows
    reasons = await _Examination(connection).reasons(examined)
    return [replace(row, body=reasons[row.oid]) if reasons.get(row.oid) else row for row in rows]


class _Examination:
    """Examines function bodies breadth first, then says which functions reach something not harmless."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._own: dict[int, str | None] = {}
        """What is wrong with each function's own body (None: nothing)."""
        self._calls: dict[int, dict[int, str]] = {}
        """The user-defined functions each body calls that need examining, by OID, with their names."""

    async def reasons(self, oids: set[int]) -> dict[int, str | None]:
        pending = oids
        while pending:
            if len(self._own) + len(pending) > MAX_EXAMINED:
                for oid in pending:
                    self._own[oid] = f"calls more functions than SafeDB examines ({MAX_EXAMINED})"
                    self._calls[oid] = {}
                break
            for definition in await catalog.function_definitions(self._connection, sorted(pending)):
                await self._examine(definition)
            for oid in pending - self._own.keys():  # dropped meanwhile
                self._own[oid] = "no longer exists"
                self._calls[oid] = {}
            pending = {callee for oid in pending for callee in self._calls[oid]} - self._own.keys()
        return {oid: self._reason(oid, set()) for oid in oids}

    def _reason(self, oid: int, seen: set[int]) -> str | None:
        """What is wrong with `oid` or anything it calls, at any depth (a function calling itself adds nothing)."""
        seen.add(oid)
        if (own := self._own[oid]) is not None:
            return own
        for callee, name in self._calls[oid].items():
            if callee not in seen and self._reason(callee, seen) is not None:
                return f"calls {name}(), which is not harmless"
        return None

    async def _examine(self, definition: catalog.FunctionDefinition) -> None:
        oid = definition.function.oid
        self._own[oid], self._calls[oid] = None, {}
        try:
            if definition.support:  # an aggregate: its support functions
                supports = await catalog.function_definitions(self._connection, definition.support)
                rows = [support.function for support in supports]
            else:
                rows = await self._body_rows(definition)
        except Unexaminable as exc:
            self._own[oid] = str(exc)
        except _Harmful as exc:
            self._own[oid] = exc.reason
        else:
            self._calls[oid] = {row.oid: row.name for row in rows if row.judged_by_body}

    async def _body_rows(self, definition: catalog.FunctionDefinition) -> list[CatalogFunction]:
        """The functions the body reaches. Raises Unexaminable, or _Harmful with the first thing that is not
        harmless (a call, a statement that is not a read)."""
        if definition.definition is None:
            raise Unexaminable(f"is written in {definition.language}, whose code SafeDB cannot examine")
        statements = body_statements(definition.language, definition.definition)
        for statement in statements:
            if not statement.classification.read_only:
                raise _Harmful(f"runs {statement.classification.summary()}")
        refs = [ref for statement in statements for ref in statement.functions]
        async with _search_path(self._connection, definition.search_path):
            facts = await catalog.function_facts(
                self._connection,
                [ref.name for ref in refs],
                _all(statement.operators for statement in statements),
                _all(statement.relations for statement in statements),
                _all(statement.types for statement in statements),
            )
        if definition.security_definer:
            # Its names resolve with its owner's rights, in schemas the reader may not use: any function of a
            # called name counts.
            facts = [replace(row, on_search_path=True) for row in facts]
        if changes := function_changes(refs, facts):
            raise _Harmful(_calls(changes[0]))
        return reached_functions(refs, facts)


_CALLED = frozenset({ObjectType.FUNCTION, ObjectType.ADVISORY_LOCK, ObjectType.LARGE_OBJECT})


def _calls(change: Change) -> str:
    """What a body does that is not harmless, to follow "it"."""
    if change.target.type in _CALLED:  # named after the function called
        return f"calls {change.target.name}()" + (f" ({change.detail})" if change.detail else "")
    return f"makes a change ({change})"


class _Harmful(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _all(groups: Iterable[Iterable[T]]) -> list[T]:
    return list(dict.fromkeys(item for group in groups for item in group))


@asynccontextmanager
async def _search_path(connection: Connection, path: str | None) -> AsyncIterator[None]:
    """Within the block, the search path a function sets for itself (None: the caller's, unchanged)."""
    if path is None:
        yield
        return
    cursor = await connection.execute("SELECT current_setting('search_path')")
    (previous,) = await cursor.fetchone() or ("",)
    await connection.execute("SELECT set_config('search_path', %s, true)", (path,))
    try:
        yield
    finally:
        if connection.info.transaction_status is not TransactionStatus.INERROR:  # else the error is the news
            await connection.execute("SELECT set_config('search_path', %s, true)", (previous,))
