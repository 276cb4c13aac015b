"""The impact preview: what an approved statement would do, measured and then rolled back."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from safedb import wording
from safedb.db.backend import Impact
from safedb.db.sqlite.connections import (
    MAX_VALUE_BYTES,
    OUT_OF_MEMORY,
    drain,
    dry_run_in_memory,
    quote_identifier,
    roll_back,
    was_stopped,
)
from safedb.db.sqlite.inspector import module_tables
from safedb.sql.classification import ChangeKind, Classification, ObjectType
from safedb.sql.structure import says_replace

Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]
T = TypeVar("T")

_WRITES_ROWS = frozenset({ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.REPLACE, ChangeKind.UPSERT})
_REWRITES_REFERENCES = frozenset({ChangeKind.RENAME, ChangeKind.ALTER})
"""Renaming a table or a column rewrites the triggers, views and indexes that name it."""
_DEFINITIONS = "SELECT type, name, sql FROM {schema}.sqlite_schema WHERE sql IS NOT NULL"


def measure_impact(
    connection: sqlite3.Connection, classification: Classification, authorizer: Callable[[], Authorizer]
) -> Impact:
    """Dry-run data changes inside a transaction that is always rolled back; count rows for schema changes.

    Runs on a writer connection, within the connection's time limit, under the authorizer that
    `authorizer` makes (only the statement's own actions). It is made once the dry run's transaction has
    begun, so that what it reads of the catalog is what the statement runs against. A statement that
    fails in the dry run is reported in the preview's lines: the question is still asked. Being stopped
    is raised instead (the time limit, another connection's lock, or the event loop's smaller value limit), so
    that the caller may measure again where it can wait longer, or build larger values.
    """
    if classification.only_data_changes:
        return _dry_run(connection, classification, authorizer)
    lines = _schema_lines(connection, classification)
    if any(change.kind in _REWRITES_REFERENCES for change in classification.changes):
        lines.extend(_rewritten_definitions(connection, classification, authorizer))
    return Impact(lines=tuple(lines))


def rows_changed(connection: sqlite3.Connection, total_before: int) -> int:
    """Rows the statement that just completed changed in all (its triggers' included), given
    `connection.total_changes` from before it ran. The dry run and the approved run count the same way.

    Not `cursor.rowcount`: Python's sqlite3 reports -1 for a statement that begins with `WITH`. Rows that
    REPLACE deletes to resolve a conflict are not counted (SQLite's own counters leave them out).
    """
    return connection.total_changes - total_before


class _DidNotFinish(Exception):
    """The statement failed in a rolled-back run; the argument is what SQLite reported."""


def _rolled_back_run(
    connection: sqlite3.Connection,
    classification: Classification,
    authorizer: Callable[[], Authorizer],
    observe: Callable[[Callable[[], None]], T],
) -> T:
    """What `observe` sees of the statement run within a transaction that is always rolled back: it is given the
    run, to call once between its looks at the connection. The statement runs under the authorizer that
    `authorizer` makes once the transaction has begun, its temporary data in memory (`dry_run_in_memory`).

    _DidNotFinish when the statement fails; being stopped (the time limit, another connection's lock) is raised.
    """

    def run() -> None:
        connection.set_authorizer(authorizer())
        drain(connection.execute(classification.statement))
        connection.set_authorizer(None)

    with dry_run_in_memory(connection):
        connection.execute("BEGIN IMMEDIATE")
        try:
            return observe(run)
        except sqlite3.Error as exc:
            if was_stopped(exc) or _past_event_loop_limit(connection, exc):
                raise
            raise _DidNotFinish(str(exc)) from None
        except MemoryError:
            raise _DidNotFinish(OUT_OF_MEMORY) from None
        finally:
            connection.set_authorizer(None)
            roll_back(connection)


def _past_event_loop_limit(connection: sqlite3.Connection, exc: sqlite3.Error) -> bool:
    """Whether the statement built a value larger than `connection` allows, which a writer in a worker thread allows
    (`MAX_VALUE_BYTES_ON_EVENT_LOOP`): raised, so that it is measured again there, where the approved change runs
    when it fails on the event loop's writer. Reported as a dry run that did not finish, the question showed no
    count for an approved DELETE to be held to, which then ran, and deleted what it matched."""
    primary_code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return primary_code == sqlite3.SQLITE_TOOBIG and connection.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) < MAX_VALUE_BYTES


def _dry_run(
    connection: sqlite3.Connection, classification: Classification, authorizer: Callable[[], Authorizer]
) -> Impact:
    def observe(run: Callable[[], None]) -> tuple[int, int, bool, bool]:
        before = connection.total_changes
        run()
        total = rows_changed(connection, before)
        # The statement's own rows, without its triggers' (shown, not bound).
        (own,) = connection.execute("SELECT changes()").fetchone() if total else (0,)
        virtual = total > own and _changes_virtual_table(connection, classification)
        return total, own, virtual, may_replace(connection, classification)

    try:
        total, own, virtual, replaces = _rolled_back_run(connection, classification, authorizer, observe)
    except _DidNotFinish as reported:
        return Impact(lines=(f"the dry run did not finish (SQLite reported: {reported}).",))
    verb = ", ".join(str(kind) for kind in classification.kinds)
    line = f"{wording.rows(own)} would be affected ({verb}), measured by a dry run that was rolled back"
    if virtual:
        line += f"; {wording.rows(total)} in all, counting what the virtual table's module writes to its own tables"
    elif total > own:
        line += f"; {wording.rows(total)} in all, including changes made by triggers"
    if replaces:
        line += (
            ". REPLACE may also delete rows that conflict on a unique key, and SQLite does not count those: "
            "they are not in this number"
        )
        return Impact(lines=(line + ".",))
    return Impact(lines=(line + ".",), rows_affected=total)


def _changes_virtual_table(connection: sqlite3.Connection, classification: Classification) -> bool:
    """Whether the statement changes a virtual table, whose module counts its writes to its shadow tables (an FTS
    index's rows) as changes of their own."""
    return any(
        connection.execute(
            f"SELECT 1 FROM {quote_identifier(change.target.schema or 'main')}.sqlite_schema "
            "WHERE type = 'table' AND name = ? COLLATE NOCASE AND sql LIKE 'CREATE VIRTUAL TABLE %'",
            (change.target.name,),
        ).fetchone()
        is not None
        for change in classification.changes
        if change.target.type is ObjectType.TABLE
    )


def may_replace(connection: sqlite3.Connection, classification: Classification) -> bool:
    """Whether REPLACE conflict resolution may delete rows as the statement runs, which SQLite's change counts
    leave out: the statement says REPLACE, or a trigger on a table it changes, or the definition of a table
    it writes rows into. The word counts as a keyword, not in a comment, a string or a name, nor as the
    `replace()` function: otherwise a comment would switch off the binding of the count."""
    if says_replace(classification.statement):
        return True
    # The kinds of definitions to search, per changed table (a statement may change one table several ways).
    # A view's INSTEAD OF triggers are on the view: its changes name it as their target.
    searched: dict[tuple[str | None, str], set[str]] = {}
    for change in classification.changes:
        if change.target.type is ObjectType.TABLE:
            kinds = searched.setdefault((change.target.schema, change.target.name), {"trigger"})
            if change.kind in _WRITES_ROWS:
                kinds.add("table")
    for (schema, table), kinds in searched.items():
        definitions = connection.execute(
            f"SELECT type, sql FROM {_qualified('sqlite_schema', schema)} WHERE tbl_name = ? COLLATE NOCASE", (table,)
        )
        if any(kind in kinds and says_replace(sql or "") for kind, sql in definitions):
            return True
    return False


def _schema_lines(connection: sqlite3.Connection, classification: Classification) -> list[str]:
    lines = []
    for change in classification.changes:
        target = change.target
        if change.kind is ChangeKind.DROP and target.type is ObjectType.VIRTUAL_TABLE:
            # Counted through its module (an FTS index, an R-tree): what the table holds is what goes.
            if (count := _row_count(connection, target.name, target.schema)) is not None:
                lines.append(f"DROP VIRTUAL TABLE {target.name}: {wording.rows(count)} will be lost.")
            # Its module drops every table of the names it keeps, also one it did not make (FTS3 all five).
            if taken := module_tables(connection, target):
                counts = [(name, _row_count(connection, name, target.schema)) for name in taken]
                counted = [name if rows is None else f"{name} ({wording.rows(rows)})" for name, rows in counts]
                lines.append(f"Its module drops with it the tables {', '.join(counted)}.")
            continue
        if target.type is not ObjectType.TABLE or change.kind in (ChangeKind.CREATE, ChangeKind.ANALYZE):
            continue
        count = _row_count(connection, target.name, target.schema)
        if count is None:
            continue
        if change.kind is ChangeKind.DROP:
            lines.append(f"DROP TABLE {target.name}: {wording.rows(count)} will be lost.")
        else:
            lines.append(f"{str(change.kind).upper()} {target}: the table holds {wording.rows(count)}.")
    return lines


def _rewritten_definitions(
    connection: sqlite3.Connection, classification: Classification, authorizer: Callable[[], Authorizer]
) -> list[str]:
    """The other objects whose definitions the statement rewrites (SQLite renames a table or a column in the triggers,
    views and indexes that name it), found by running it within a transaction that is rolled back."""
    schemas = sorted({change.target.schema or "main" for change in classification.changes})

    def definitions() -> dict[tuple[str, str, str], str]:
        return {
            (schema, kind, name): sql
            for schema in schemas
            for kind, name, sql in connection.execute(_DEFINITIONS.format(schema=quote_identifier(schema)))
        }

    def observe(run: Callable[[], None]) -> tuple[dict[tuple[str, str, str], str], dict[tuple[str, str, str], str]]:
        before = definitions()
        run()
        return before, definitions()

    try:
        before, after = _rolled_back_run(connection, classification, authorizer, observe)
    except _DidNotFinish as reported:
        return [f"Which other definitions it rewrites could not be checked (SQLite reported: {reported})."]
    changed = {(change.target.schema or "main", change.target.name.casefold()) for change in classification.changes}
    rewritten = [
        f"{kind} {name}"
        for (schema, kind, name), sql in before.items()
        if (schema, name.casefold()) not in changed and after.get((schema, kind, name), sql) != sql
    ]
    return [f"Also rewrites the definitions of: {', '.join(rewritten)}."] if rewritten else []


def _row_count(connection: sqlite3.Connection, table: str, schema: str | None) -> int | None:
    try:
        (count,) = connection.execute(f"SELECT count(*) FROM {_qualified(table, schema)}").fetchone()
    except sqlite3.Error as exc:
        if was_stopped(exc):
            raise
        return None
    return int(count)


def _qualified(name: str, schema: str | None) -> str:
    """`name` quoted, after its schema when it has one."""
    quoted = quote_identifier(name)
    return f"{quote_identifier(schema)}.{quoted}" if schema else quoted
