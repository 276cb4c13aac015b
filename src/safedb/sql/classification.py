"""The typed result of classifying one SQL statement."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum

MAX_STATEMENT_CHARS = 1_000_000
"""The longest statement SafeDB takes, in characters: classifying one reads all of it, in Python too."""


class ChangeCategory(StrEnum):
    DATA = "data change"
    SCHEMA = "schema change"
    DATABASE = "database-level change"
    EXTENSION = "extension loading"
    UNKNOWN = "unrecognised change"


class ChangeKind(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    REPLACE = "replace"
    UPSERT = "upsert"
    CREATE = "create"
    ALTER = "alter"
    RENAME = "rename"
    DROP = "drop"
    ATTACH = "attach"
    DETACH = "detach"
    VACUUM = "vacuum"
    REINDEX = "reindex"
    ANALYZE = "analyze"
    PRAGMA = "pragma"
    LOAD_EXTENSION = "load_extension"
    UNKNOWN = "unknown"
    # PostgreSQL (safedb.sql.postgres_classifier)
    TRUNCATE = "truncate"
    MERGE = "merge"
    COPY = "copy"
    SEQUENCE = "sequence"
    REFRESH = "refresh"
    GRANT = "grant"
    REVOKE = "revoke"
    ROLE = "role"
    SETTING = "setting"
    LOCK = "lock"
    NOTIFY = "notify"
    CLUSTER = "cluster"
    CHECKPOINT = "checkpoint"
    COMMENT = "comment"
    CALL = "call"
    DO = "do"
    FUNCTION_CALL = "function call"

    @property
    def category(self) -> ChangeCategory:
        return _CATEGORIES[self]


_CATEGORIES = {
    ChangeKind.INSERT: ChangeCategory.DATA,
    ChangeKind.UPDATE: ChangeCategory.DATA,
    ChangeKind.DELETE: ChangeCategory.DATA,
    ChangeKind.REPLACE: ChangeCategory.DATA,
    ChangeKind.UPSERT: ChangeCategory.DATA,
    ChangeKind.CREATE: ChangeCategory.SCHEMA,
    ChangeKind.ALTER: ChangeCategory.SCHEMA,
    ChangeKind.RENAME: ChangeCategory.SCHEMA,
    ChangeKind.DROP: ChangeCategory.SCHEMA,
    ChangeKind.ATTACH: ChangeCategory.DATABASE,
    ChangeKind.DETACH: ChangeCategory.DATABASE,
    ChangeKind.VACUUM: ChangeCategory.DATABASE,
    ChangeKind.REINDEX: ChangeCategory.DATABASE,
    ChangeKind.ANALYZE: ChangeCategory.DATABASE,
    ChangeKind.PRAGMA: ChangeCategory.DATABASE,
    ChangeKind.LOAD_EXTENSION: ChangeCategory.EXTENSION,
    ChangeKind.UNKNOWN: ChangeCategory.UNKNOWN,
    ChangeKind.TRUNCATE: ChangeCategory.DATA,
    ChangeKind.MERGE: ChangeCategory.DATA,
    ChangeKind.COPY: ChangeCategory.DATA,
    ChangeKind.SEQUENCE: ChangeCategory.DATA,
    ChangeKind.REFRESH: ChangeCategory.DATA,
    ChangeKind.GRANT: ChangeCategory.DATABASE,
    ChangeKind.REVOKE: ChangeCategory.DATABASE,
    ChangeKind.ROLE: ChangeCategory.DATABASE,
    ChangeKind.SETTING: ChangeCategory.DATABASE,
    ChangeKind.LOCK: ChangeCategory.DATABASE,
    ChangeKind.NOTIFY: ChangeCategory.DATABASE,
    ChangeKind.CLUSTER: ChangeCategory.DATABASE,
    ChangeKind.CHECKPOINT: ChangeCategory.DATABASE,
    ChangeKind.COMMENT: ChangeCategory.SCHEMA,
    ChangeKind.CALL: ChangeCategory.UNKNOWN,
    ChangeKind.DO: ChangeCategory.UNKNOWN,
    ChangeKind.FUNCTION_CALL: ChangeCategory.UNKNOWN,
}


class ObjectType(StrEnum):
    TABLE = "table"
    INDEX = "index"
    VIEW = "view"
    TRIGGER = "trigger"
    VIRTUAL_TABLE = "virtual table"
    DATABASE = "database"
    FILE = "file"
    PRAGMA = "pragma"
    FUNCTION = "function"
    STATEMENT = "statement"
    # PostgreSQL (safedb.sql.postgres_classifier)
    SCHEMA = "schema"
    SEQUENCE = "sequence"
    MATERIALIZED_VIEW = "materialized view"
    ROLE = "role"
    SETTING = "setting"
    EXTENSION = "extension"
    PROCEDURE = "procedure"
    TYPE = "type"
    CHANNEL = "channel"
    LARGE_OBJECT = "large object"
    ADVISORY_LOCK = "advisory lock"


@dataclass(frozen=True, order=True)
class DatabaseObject:
    type: ObjectType
    name: str
    schema: str | None = None

    def __str__(self) -> str:
        qualified = f"{self.schema}.{self.name}" if self.schema not in (None, "main") else self.name
        return qualified if self.type is ObjectType.STATEMENT else f"{self.type} {qualified}"


@dataclass(frozen=True, order=True)
class Change:
    """One thing the statement would do. `via` names the trigger or view it happens through."""

    kind: ChangeKind
    target: DatabaseObject
    via: str | None = None
    detail: str | None = None

    def __str__(self) -> str:
        # "pragma user_version", not "pragma pragma user_version".
        text = str(self.target) if str(self.kind) == str(self.target.type) else f"{self.kind} {self.target}"
        if self.detail:
            text += f" ({self.detail})"
        if self.via:
            text += f" via {self.via}"
        return text


@dataclass(frozen=True, order=True)
class ThroughView:
    """PostgreSQL: a data change of an automatically updatable view, which PostgreSQL makes in the relation the
    view reads instead (a table, or the next view of a chain). Its triggers, rules, foreign keys and defaults run."""

    kind: ChangeKind
    view: DatabaseObject
    beneath: DatabaseObject

    @property
    def change(self) -> Change:
        """The change in the relation beneath, as the question shows it: `delete table public.t via view public.v`."""
        return Change(self.kind, self.beneath, via=str(self.view))


@dataclass(frozen=True)
class Classification:
    """What one statement would do. No changes means the statement is read-only."""

    statement: str
    changes: tuple[Change, ...] = ()
    reads: tuple[str, ...] = ()
    engine_view: frozenset[Hashable] = field(default=frozenset(), repr=False)
    """The engine's own record of what the statement does (for SQLite, its authorizer events). An
    approved statement may do only what this records; the backend enforces that when running it."""
    runs: tuple[str, ...] = ()
    """SQLite: the triggers and views whose code the statement runs, by name (what SQLite's authorizer names as
    the source of an action, but for WITH queries, which it names so too), reads only included. A trigger added
    while a person decides runs code nobody saw, even one that writes nothing (`RAISE(IGNORE)` can skip the row
    the question counted), so an approval holds only for the code it was asked about."""
    program_length: int = 0
    """SQLite: how many instructions the statement compiles to (0 when not compiled, and for PostgreSQL)."""
    resolved: tuple[tuple[str, str | None], ...] = ()
    """Each table (PostgreSQL: and view, sequence, index; SQLite: and index) the statement names, and the one that
    name meant when the statement was classified, with what tells it from another of the same name (PostgreSQL:
    `schema.name (oid N)`; SQLite: `schema.name (root page N)`; None for none). A name may mean another table
    later: two tables swap names, one is dropped and made again, or (PostgreSQL) one of that name is created in a
    schema the search path reaches first. An approval holds only for the tables it was asked about
    (`names_moved`). SQLite: also each trigger and view in `runs`, with a fingerprint of its definition."""
    code_version: str | None = None
    """PostgreSQL, for a statement that runs code created in the database (a function it calls, a procedure, a DO
    block, triggers, rules, stored code): a version of every function and procedure created there. The question
    names that code, not the code it calls in turn, which one created, replaced or dropped while a person decides
    may change: an approval holds only while none is."""
    cascades: tuple[str, ...] = ()
    """PostgreSQL: the tables foreign keys carry the statement's DELETE, UPDATE or TRUNCATE to, and the children and
    partitions of a table it empties or drops, as its question shows them. A foreign key added, or a partition
    attached, while a person decides takes the change further; an approval holds only for these."""
    stored_code: tuple[str, ...] = ()
    """PostgreSQL, for a data change: what the stored code (defaults, constraints, indexes, casts) of the tables it
    reaches calls that a rollback may not undo, with a fingerprint of each user-defined function. A default or
    constraint added while a person decides runs code nobody saw; an approval holds only for this code."""
    sets_off_unjudged_code: bool = False
    """PostgreSQL: the statement sets off code created in the database besides its own work (the triggers, rules
    and event triggers in `runs`; a user-defined function its tables' stored code calls, in `stored_code`), whose
    effects SafeDB does not judge: a trigger may drop a table or grant rights. It counts as an unrecognised change
    too (`categories`), so a target that asks or refuses those asks or refuses it, whatever its own kind."""
    through_views: tuple[ThroughView, ...] = ()
    """PostgreSQL: the changes the statement makes through views, to the end of each chain (their changes are among
    `changes` too). A view redefined while a person decides changes another table; an approval holds only for the
    tables it was asked about."""

    @property
    def read_only(self) -> bool:
        return not self.changes

    @property
    def kinds(self) -> tuple[ChangeKind, ...]:
        return tuple(dict.fromkeys(change.kind for change in self.changes))

    @property
    def categories(self) -> tuple[ChangeCategory, ...]:
        categories = dict.fromkeys(kind.category for kind in self.kinds)
        if self.sets_off_unjudged_code:
            categories[ChangeCategory.UNKNOWN] = None
        return tuple(categories)

    @property
    def only_data_changes(self) -> bool:
        """Its own changes are all data changes (the code it sets off aside)."""
        return bool(self.kinds) and all(kind.category is ChangeCategory.DATA for kind in self.kinds)

    @property
    def touched(self) -> tuple[DatabaseObject, ...]:
        return tuple(dict.fromkeys(change.target for change in self.changes))

    # Worked out once per classification (classifications are remembered per statement): the question, the
    # ticket, the result and every audit record of a change show these.
    @functools.cached_property
    def summary(self) -> str:
        """One line such as `data change (delete)`."""
        if self.read_only:
            return "read-only"
        parts = []
        for category in self.categories:
            kinds = ", ".join(str(kind) for kind in self.kinds if kind.category is category)
            parts.append(f"{category} ({kinds})" if kinds else f"{category} by the code it sets off")
        return "; ".join(parts)

    @functools.cached_property
    def change_lines(self) -> tuple[str, ...]:
        """Each change in words, such as `delete table users`."""
        return tuple(str(change) for change in self.changes)


def names_moved(approved: Classification, now: tuple[tuple[str, str | None], ...]) -> list[str]:
    """How the names `approved.resolved` lists mean other relations `now` (the same names resolved again), in words."""
    return [
        f"{name} now means {meant or 'no table'}, not {was or 'no table'}"
        for (name, was), (_, meant) in zip(approved.resolved, now, strict=True)
        if meant != was
    ]
