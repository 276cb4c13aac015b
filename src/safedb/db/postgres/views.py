"""Where PostgreSQL makes a data change of a view.

For each kind of change, a view is changed in one of three ways:

- an INSTEAD OF trigger of the view for that event, or an INSTEAD rule, does the work (`fired_code` names them);
- else, when the view is automatically updatable (it reads one relation, no join, aggregate...), PostgreSQL makes
  the change in the relation the view reads, and so on down a chain of views to a table: that table's triggers,
  rules, foreign keys' actions and column defaults run with the statement;
- else PostgreSQL refuses the statement.

`through_views` follows each view a statement changes down its chain, so that its classification names the
relations beneath (`Classification.through_views`, whose changes join the statement's own: the triggers, cascades,
dry run and locks of the approved run then cover them as they cover a table the statement names). The approved
run follows the chains again and stops when they lead elsewhere (a view redefined, a table replaced by a view, an
INSTEAD OF trigger added).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio.to_thread

from safedb.db.postgres.connections import Connection
from safedb.inline_work import INLINE_STATEMENT_CHARS
from safedb.sql.classification import ChangeKind, Classification, DatabaseObject, ObjectType, ThroughView
from safedb.sql.postgres_tree import QualifiedName
from safedb.sql.postgres_views import view_source


@dataclass(frozen=True)
class _Event:
    name: str
    trigger_bit: int
    """In `pg_trigger.tgtype` (PostgreSQL's TRIGGER_TYPE_*)."""
    rule_type: str
    """`pg_rewrite.ev_type`."""
    updatable_bit: int
    """In `pg_relation_is_updatable` (1 << CmdType)."""


_INSERT = _Event("INSERT", 4, "3", 8)
_UPDATE = _Event("UPDATE", 16, "2", 4)
_DELETE = _Event("DELETE", 8, "4", 16)
_EVENTS = {
    ChangeKind.INSERT: (_INSERT,),
    ChangeKind.UPDATE: (_UPDATE,),
    ChangeKind.DELETE: (_DELETE,),
    ChangeKind.UPSERT: (_INSERT, _UPDATE),
    ChangeKind.MERGE: (_INSERT, _UPDATE, _DELETE),
}
_INSTEAD_TRIGGER = 64
_MERGE_INTO_VIEWS = 170000
"""The first server version (`server_version_num`) that merges into a view."""
_LONGEST_CHAIN = 32
"""Views followed down one chain at most; PostgreSQL itself stops at a cycle ("infinite recursion")."""

# The relation `name` means, and for a view what decides how PostgreSQL changes it: its query, the events it can
# change automatically, those an INSTEAD OF trigger takes (a view's triggers cannot be disabled), and those an
# enabled INSTEAD rule takes, without a condition and with one (PostgreSQL then refuses to change the view itself).
_RELATION_SQL = """
SELECT n.nspname, c.relname, c.relkind::text,
       CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
       CASE WHEN c.relkind = 'v' THEN pg_relation_is_updatable(c.oid, false) ELSE 0 END,
       ARRAY(SELECT t.tgtype::integer FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgtype & %(instead)s <> 0),
       ARRAY(SELECT r.ev_type::text FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.is_instead AND r.ev_type <> '1'
             AND r.ev_enabled <> 'D' AND r.ev_qual::text = '<>'),
       ARRAY(SELECT r.ev_type::text FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.is_instead AND r.ev_type <> '1'
             AND r.ev_enabled <> 'D' AND r.ev_qual::text <> '<>'),
       current_setting('server_version_num')::integer
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%(name)s)
"""


@dataclass(frozen=True)
class ViewChanges:
    """Where the data changes of the views a statement changes land."""

    through: tuple[ThroughView, ...] = ()
    """Made by PostgreSQL in the relations beneath, each link of each chain."""
    notes: tuple[str, ...] = ()
    """For a view PostgreSQL does not change by itself: who does instead, or that PostgreSQL will refuse."""


@dataclass(frozen=True)
class _Relation:
    """A row of `_RELATION_SQL`."""

    schema: str
    name: str
    kind: str
    query: str | None
    updatable: int
    trigger_types: list[int]
    rule_types: list[str]
    conditional_rule_types: list[str]
    server_version: int

    @property
    def quoted(self) -> str:
        return QualifiedName(self.name, self.schema).quoted()


async def through_views(connection: Connection, statement: Classification) -> ViewChanges:
    """Follow each view `statement` (as the parser classified it) changes down to where its change lands, in the
    caller's transaction and search path."""
    through: list[ThroughView] = []
    notes: list[str] = []
    for change in statement.changes:
        if change.kind not in _EVENTS or change.target.type is not ObjectType.TABLE:
            continue
        relation = await _relation(connection, QualifiedName(change.target.name, change.target.schema).quoted())
        seen: set[str] = set()
        while relation is not None and relation.kind == "v" and relation.quoted not in seen:
            seen.add(relation.quoted)
            view = DatabaseObject(ObjectType.VIEW, relation.name, relation.schema)
            source = await _changed_in_its_place(relation, change.kind)
            beneath = await _relation(connection, source.quoted()) if isinstance(source, QualifiedName) else None
            if beneath is None or len(seen) > _LONGEST_CHAIN:
                notes.append(f"{view}: {source if isinstance(source, str) else 'SafeDB cannot follow it further'}.")
                break
            changed = DatabaseObject(ObjectType.TABLE, beneath.name, beneath.schema)  # as a data change names it
            through.append(ThroughView(change.kind, view, changed))
            relation = beneath
    return ViewChanges(tuple(dict.fromkeys(through)), tuple(dict.fromkeys(notes)))


async def _relation(connection: Connection, name: str) -> _Relation | None:
    cursor = await connection.execute(_RELATION_SQL, {"name": name, "instead": _INSTEAD_TRIGGER})
    row = await cursor.fetchone()
    return None if row is None else _Relation(*row)


async def _changed_in_its_place(view: _Relation, kind: ChangeKind) -> QualifiedName | str:
    """The relation PostgreSQL changes in the place of `view` in a change of `kind`, as its query names it; or
    why there is none."""
    events = _EVENTS[kind]
    done_by = []
    for event in events:
        if any(trigger_type & event.trigger_bit for trigger_type in view.trigger_types):
            done_by.append(f"INSTEAD OF {event.name} trigger")
        elif event.rule_type in view.rule_types:
            done_by.append("INSTEAD rule")
    if done_by:
        handlers = " and ".join(dict.fromkeys(done_by))
        return f"PostgreSQL runs its {handlers} in place of the change, and changes nothing beneath the view by itself"
    if any(event.rule_type in view.conditional_rule_types for event in events):
        return "PostgreSQL will refuse the statement (a view with a conditional INSTEAD rule is not updated by itself)"
    if kind is ChangeKind.MERGE and view.server_version < _MERGE_INTO_VIEWS:
        return "PostgreSQL will refuse the statement (MERGE into a view needs PostgreSQL 17)"
    updatable = all(view.updatable & event.updatable_bit for event in events)
    if updatable and view.query is not None and (source := await _source(view.query)) is not None:
        return source
    verbs = " or ".join(event.name for event in events)
    return (
        f"PostgreSQL will refuse the statement (the view is not automatically updatable for {verbs}, and has no "
        "INSTEAD OF trigger or INSTEAD rule for it)"
    )


async def _source(query: str) -> QualifiedName | None:
    """`view_source`, in a worker thread when the query is long (as a long statement is analysed)."""
    if len(query) <= INLINE_STATEMENT_CHARS:
        return view_source(query)
    return await anyio.to_thread.run_sync(view_source, query)
