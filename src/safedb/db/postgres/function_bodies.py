"""Judging user-defined functions labelled immutable or stable by what their bodies call.

PostgreSQL refuses table writes from such functions, but nothing else: one labelled stable may still end
sessions (`pg_terminate_backend`), take advisory locks or reach another server (`dblink`), and a read would
run it without asking. So each one a read reaches has its body examined (`safedb.sql.postgres_bodies`),
and the calls, operators, casts and relations there are looked up and judged as a statement's are, in the
search path the function runs in: its own (`SET search_path`), else its caller's. Its parameters' and
result's types count as met (their casts, operators and domain checks run). The user-defined functions a
body reaches are examined in turn, in the context they run in. A function is harmless when nothing it
reaches, at any depth, is otherwise.

A body with PL/pgSQL variables or polymorphic parameters meets every type whose conversion or operators run
code (domains, user-defined casts and operators): the parser, which knows no catalog, cannot name a
variable's user-defined type, and a polymorphic parameter takes its argument's. Not harmless either: a
body that cannot be examined (another language, SQL built at run time), one past `MAX_EXAMINED`
functions, and, with its owner's rights (`SECURITY DEFINER`, and what it calls), names of relations or
types, which may resolve in schemas the reader cannot see, unless the search path it runs in resolves them
alike for both roles (`catalog.resolves_alike`); there any function of a called name counts.
"""

from __future__ import annotations

import re
import string
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import anyio.to_thread
from psycopg.pq import TransactionStatus

from safedb.db.postgres import catalog
from safedb.db.postgres.connections import Connection
from safedb.inline_work import INLINE_STATEMENT_CHARS
from safedb.sql.classification import Change, ObjectType
from safedb.sql.postgres_bodies import Body, Unexaminable, read_body
from safedb.sql.postgres_classifier import PostgresStatement
from safedb.sql.postgres_functions import (
    CatalogFunction,
    FunctionRef,
    function_changes,
    harmless,
    reached_functions,
    trusted,
)

MAX_EXAMINED = 64
"""The most function bodies examined for one statement; a read reaching more asks."""


# The built-in C functions behind the constructors PostgreSQL creates with a range type (`floatrange(1, 2)`, and its
# multirange's, also the cast from the range to its multirange), in the type's schema and owned by its creator:
# they only build a value.
_TYPE_CONSTRUCTORS = frozenset(
    {"range_constructor2", "range_constructor3", "multirange_constructor0", "multirange_constructor1",
     "multirange_constructor2"}
)  # fmt: skip


@dataclass(frozen=True)
class _Context:
    """How a call of the function runs: in which search path (None: the reader's), with whose rights."""

    oid: int
    search_path: str | None = None
    owner: int | None = None
    """With its owner's rights (`SECURITY DEFINER`, or called by such a function): that owner's role."""


async def calls_with_effects(connection: Connection, statement: PostgresStatement) -> list[Change]:
    """The changes the functions `statement` calls may make (directly, or through the views, policies, domains and
    casts it reaches), as they are defined now. Runs inside the caller's transaction, which has called
    `catalog.for_catalog_queries`."""
    facts = await catalog.function_facts(
        connection,
        [statement],
        # A read plans its relations; a maintenance statement runs their stored code (a change that asks anyway
        # leaves it to its impact preview).
        planned_code=statement.classification.read_only or statement.runs_stored_code,
        relations=await catalog.every_relation(connection) if statement.every_relation else (),
    )
    return function_changes(statement.functions, await fingerprinted(connection, await judged(connection, facts)))


async def fingerprinted(connection: Connection, rows: list[CatalogFunction]) -> list[CatalogFunction]:
    """`rows`, each user-defined function that is not harmless with the fingerprint of its definition."""
    fingerprints = await catalog.definition_fingerprints(
        connection, sorted({row.oid for row in rows if not trusted(row) and not harmless(row)})
    )
    return [replace(row, definition=fingerprints.get(row.oid)) for row in rows]


async def judged(connection: Connection, rows: list[CatalogFunction]) -> list[CatalogFunction]:
    """`rows` (from `catalog.function_facts`), each user-defined function labelled immutable or stable marked
    with why it is not harmless (`CatalogFunction.body`) when its body shows it is not. Runs inside the
    caller's read-only transaction, which has called `catalog.for_catalog_queries`."""
    called = {_Context(row.oid) for row in rows if row.judged_by_body}
    if not called:
        return rows
    reasons = await _Examination(connection).reasons(called)
    return [replace(row, body=reasons.get(_Context(row.oid))) if row.judged_by_body else row for row in rows]


class _Examination:
    """Examines function bodies breadth first, then says which functions reach something not harmless."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._own: dict[_Context, str | None] = {}
        """What is wrong with each function's own body, as called (None: nothing)."""
        self._calls: dict[_Context, dict[_Context, str]] = {}
        """The user-defined functions each body calls that need examining, as called, with their names."""
        self._converting_types: list[int] | None = None
        """`catalog.converting_types`, once looked up."""

    async def reasons(self, called: set[_Context]) -> dict[_Context, str | None]:
        pending = called
        while pending:
            if len(self._own) + len(pending) > MAX_EXAMINED:
                for context in pending:
                    self._own[context] = f"calls more functions than SafeDB examines ({MAX_EXAMINED})"
                    self._calls[context] = {}
                break
            definitions = {
                definition.function.oid: definition
                for definition in await catalog.function_definitions(
                    self._connection, sorted({context.oid for context in pending})
                )
            }
            for context in pending:
                self._own[context], self._calls[context] = None, {}
                if (definition := definitions.get(context.oid)) is None:
                    self._own[context] = "no longer exists"  # dropped meanwhile
                    continue
                try:
                    await self._examine(context, definition)
                except Unexaminable as exc:
                    self._own[context] = str(exc)
                except _Harmful as exc:
                    self._own[context] = exc.reason
            pending = {callee for context in pending for callee in self._calls[context]} - self._own.keys()
        return {context: self._reason(context, set()) for context in called}

    def _reason(self, context: _Context, seen: set[_Context]) -> str | None:
        """What is wrong with the function or anything it calls, at any depth (a function calling itself adds
        nothing)."""
        seen.add(context)
        if (own := self._own[context]) is not None:
            return own
        for callee, name in self._calls[context].items():
            if callee not in seen and self._reason(callee, seen) is not None:
                return f"calls {name}(), which is not harmless"
        return None

    async def _examine(self, context: _Context, definition: catalog.FunctionDefinition) -> None:
        """Fill in `_calls` for `context`, or raise Unexaminable or _Harmful with the first thing that is not
        harmless (a call, a statement that is not a read)."""
        # A function with a search path or rights of its own runs with them; else with its caller's.
        path = definition.search_path or context.search_path
        owner = definition.owner if definition.security_definer else context.owner
        if definition.support:  # an aggregate: its support functions, judged as calls of them
            supports = await catalog.function_definitions(self._connection, definition.support)
            rows = [support.function for support in supports]
            if changes := function_changes([FunctionRef(row.name, row.schema) for row in rows], rows):
                raise _Harmful(_calls(changes[0]))
        else:
            rows = await self._body_rows(definition, path, owner)
        self._calls[context] = {_Context(row.oid, path, owner): row.name for row in rows if row.judged_by_body}

    async def _body_rows(
        self, definition: catalog.FunctionDefinition, path: str | None, owner: int | None
    ) -> list[CatalogFunction]:
        """The functions the body reaches, looked up in `path`. Raises as `_examine` does."""
        if definition.language == "internal" and definition.definition in _TYPE_CONSTRUCTORS:
            return []
        if definition.definition is None or definition.language == "internal":
            raise Unexaminable(f"is written in {definition.language}, whose code SafeDB cannot examine")
        if definition.string_syntax not in (None, "on"):
            # `'x\'' , f() --'`: one string to SafeDB's parser, a call of f() with the legacy syntax.
            raise Unexaminable("reads its strings with the legacy syntax (standard_conforming_strings off)")
        body = await _read(definition.language, definition.definition)
        statements = body.statements
        for statement in statements:
            if not statement.classification.read_only:
                raise _Harmful(f"runs {statement.classification.summary}")
        met_types = list(definition.types)
        if body.declares_variables or definition.polymorphic:
            # An assignment converts the value to the variable's type, which the parser cannot always name, and
            # a polymorphic parameter takes its argument's type: as if it met every type whose conversion or
            # operators run code.
            if self._converting_types is None:
                self._converting_types = await catalog.converting_types(self._connection)
            met_types += self._converting_types
        refs = [ref for statement in statements for ref in statement.functions]
        names = any(statement.relations or statement.types for statement in statements)
        if owner is not None and names and not await _resolves_alike(self._connection, path, owner):
            raise Unexaminable(
                "runs with its owner's rights (SECURITY DEFINER) and names relations or types, which may resolve "
                "in schemas SafeDB cannot see as the reader"
            )
        async with _search_path(self._connection, path):
            facts = await catalog.function_facts(self._connection, statements, met_types)
        if owner is not None:
            # Names resolve with the owner's rights, in schemas the reader may not use: any function counts.
            facts = [replace(row, on_search_path=True) for row in facts]
        if changes := function_changes(refs, facts):
            raise _Harmful(_calls(changes[0]))
        return reached_functions(refs, facts)


_CALLED = frozenset({ObjectType.FUNCTION, ObjectType.ADVISORY_LOCK, ObjectType.LARGE_OBJECT})


async def _read(language: str, definition: str) -> Body:
    """`read_body`, in a worker thread when the definition is long, as a long statement is analysed: reading a
    body of 500,000 characters takes some 1.5 s of Python, every time a statement reaches it, and on the event
    loop every other call of the server waited for it."""
    if len(definition) <= INLINE_STATEMENT_CHARS:
        return read_body(language, definition)
    return await anyio.to_thread.run_sync(read_body, language, definition)


def _calls(change: Change) -> str:
    """What a body does that is not harmless, to follow "it"."""
    if change.target.type in _CALLED:  # named after the function called
        return f"calls {change.target.name}()" + (f" ({change.detail})" if change.detail else "")
    return f"makes a change ({change})"


class _Harmful(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _resolves_alike(connection: Connection, path: str | None, owner: int) -> bool:
    """Whether names resolve in the search path `path` (None: the reader's) alike for the reader and for the
    role `owner`: each schema there either does not exist or is usable by both or by neither, and `$user`
    names no schema of either (see `catalog.resolves_alike`)."""
    if path is None:
        cursor = await connection.execute("SELECT current_setting('search_path')")
        (path,) = await cursor.fetchone() or ("",)
    names = _schema_names(str(path))
    return names is not None and await catalog.resolves_alike(connection, names, owner)


def _schema_names(path: str) -> list[str] | None:
    """The schema names of a `search_path` setting, read as PostgreSQL reads it (`SplitIdentifierString`):
    comma-separated, an unquoted name folded to lower case, `""` inside quotes a quote; None if malformed."""
    if not path.strip(_PATH_SPACE):
        return []
    names = []
    for part in _PATH_PART.findall(path + ","):
        quoted, bare = part
        names.append(quoted.replace('""', '"') if quoted else bare.translate(_ASCII_LOWER))
    if _PATH_PART.sub("", path + ",").strip(_PATH_SPACE):
        return None  # something the pattern does not read, such as an empty name or a vertical tab
    return names


# PostgreSQL's white space (`scanner_isspace`); a no-break space and the like are part of a name. A vertical tab
# is white space to PostgreSQL 16 and later only, so outside quotes it makes the path unreadable here.
_PATH_SPACE = " \t\n\r\f"
# A name outside quotes is folded to lower case in ASCII only, as PostgreSQL folds it in a multi-byte encoding.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_PATH_PART = re.compile(rf'[{_PATH_SPACE}]*(?:"((?:[^"]|"")*)"|([^",{_PATH_SPACE}\v]+))[{_PATH_SPACE}]*,')


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
