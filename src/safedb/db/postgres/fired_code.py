"""The triggers, rules and event triggers a changing statement fires besides its own work, by name.

PostgreSQL runs them of its own accord: a TRUNCATE runs the TRUNCATE triggers of the tables it empties, a data
change the row and statement triggers and the rules of the tables it reaches (its targets, the tables their
foreign keys' actions change, the children of these), and a schema change the event triggers. A classification
names them (`Classification.runs`), so the question shows them and the approval covers exactly them: one added,
enabled or redefined (its function replaced) while a person decides runs code nobody saw, and the approved run
stops (`check_fired_unchanged`).
"""

from __future__ import annotations

from safedb.db.postgres.catalog import DEFINITION_FINGERPRINT, fingerprint
from safedb.db.postgres.connections import Connection
from safedb.db.postgres.impact import CLOSURE, DATA_KINDS, quoted_targets
from safedb.errors import ChangedSinceQuestion
from safedb.sql.classification import ChangeKind, Classification

# tgtype bits (PostgreSQL's TRIGGER_TYPE_*): INSERT 4, DELETE 8, UPDATE 16, TRUNCATE 32.
_DATA_EVENTS = 4 | 8 | 16
_TRUNCATE_EVENT = 32
TABLE_EVENT_KINDS = DATA_KINDS | {ChangeKind.TRUNCATE}
"""Changes whose triggers are those of the tables they change."""
# Changes that run no DDL command, so fire no event trigger (a function call may run one: it counts).
_NO_EVENT_KINDS = DATA_KINDS | {ChangeKind.TRUNCATE, ChangeKind.SEQUENCE, ChangeKind.LOCK}

# Each is named with its function and a fingerprint of its definition and its function's: a trigger dropped and
# created again with other arguments, or whose function is replaced, runs other code under the same name.
_TRIGGERS_SQL = f"""
WITH RECURSIVE {CLOSURE}
SELECT 'trigger ' || quote_ident(t.tgname) || ' on ' || t.tgrelid::regclass::text || ' (' || t.tgfoid::regproc::text
       || '(), definition ' || {fingerprint("pg_get_triggerdef(t.oid) || pg_get_functiondef(t.tgfoid)")} || ')'
FROM pg_trigger t JOIN closure ON closure.oid = t.tgrelid
WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & %(events)s <> 0
UNION
SELECT 'rule ' || quote_ident(r.rulename) || ' on ' || r.ev_class::regclass::text
       || ' (definition ' || {fingerprint("pg_get_ruledef(r.oid)")} || ')'
FROM pg_rewrite r JOIN closure ON closure.oid = r.ev_class
WHERE %(rules)s AND r.ev_type <> '1' AND r.ev_enabled <> 'D'
"""
_EVENT_TRIGGERS_SQL = f"""
SELECT 'event trigger ' || quote_ident(evtname) || ' (' || evtevent
       || coalesce(' of ' || array_to_string(evttags, ', '), '') || ', ' || evtfoid::regproc::text
       || '(), definition ' || {fingerprint("pg_get_functiondef(evtfoid)")} || ')'
FROM pg_event_trigger WHERE evtenabled <> 'D'
"""

# The procedures a CALL of `name` (in `schema`, else on the search path) may run, each with a fingerprint of its
# definition: one replaced runs other code under the same name.
_PROCEDURES_SQL = f"""
SELECT 'procedure ' || p.oid::regprocedure::text || ' (definition ' || {DEFINITION_FINGERPRINT} || ')'
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prokind = 'p' AND p.proname = %(name)s
  AND (n.nspname = %(schema)s OR (%(schema)s::text IS NULL AND n.nspname = ANY (current_schemas(true))))
"""

# The targets LOCK TABLE takes (a foreign table it does not), as quoted names.
_LOCKABLE_SQL = """
SELECT c.oid::regclass::text FROM unnest(%(targets)s::text[]) AS name JOIN pg_class c ON c.oid = to_regclass(name)
WHERE c.relkind IN ('r', 'p', 'v')
"""


async def fired_code(connection: Connection, classification: Classification) -> tuple[str, ...]:
    """The user triggers, rules and event triggers that would run with the statement now, and a CALL's procedures,
    sorted."""
    found: set[str] = set()
    for change in classification.changes:
        if change.kind is ChangeKind.CALL:
            parameters = {"name": change.target.name, "schema": change.target.schema}
            cursor = await connection.execute(_PROCEDURES_SQL, parameters)
            found.update(name for (name,) in await cursor.fetchall())
    for kinds, events, rules in ((DATA_KINDS, _DATA_EVENTS, True), ({ChangeKind.TRUNCATE}, _TRUNCATE_EVENT, False)):
        if targets := quoted_targets(classification, kinds):
            cursor = await connection.execute(_TRIGGERS_SQL, {"targets": targets, "events": events, "rules": rules})
            found.update(name for (name,) in await cursor.fetchall())
    if any(kind not in _NO_EVENT_KINDS for kind in classification.kinds):
        cursor = await connection.execute(_EVENT_TRIGGERS_SQL)
        found.update(name for (name,) in await cursor.fetchall())
    return tuple(sorted(found))


async def lock_changed_tables(connection: Connection, classification: Classification) -> None:
    """Lock the tables a data change or a TRUNCATE changes as the statement itself will (in its transaction):
    nobody can then add a trigger or a rule to them, or enable one, until it ends. LOCK TABLE takes the tables'
    children too. A foreign table cannot be locked (its triggers are checked all the same)."""
    for kinds, mode in ((DATA_KINDS, "ROW EXCLUSIVE"), ({ChangeKind.TRUNCATE}, "ACCESS EXCLUSIVE")):
        if targets := quoted_targets(classification, kinds):
            await _lock(connection, targets, mode)


async def lock_read_relations(connection: Connection, relations: list[str]) -> None:
    """Lock the tables and views `relations` (quoted names) name in ACCESS SHARE mode, as a read of them does, until
    the transaction ends: nobody can then redefine such a view (nor those its query reads, which LOCK TABLE takes
    too) before the statement has run. Names that mean no lockable relation are left out."""
    await _lock(connection, relations, "ACCESS SHARE")


async def _lock(connection: Connection, names: list[str], mode: str) -> None:
    cursor = await connection.execute(_LOCKABLE_SQL, {"targets": names})
    if lockable := [str(name) for (name,) in await cursor.fetchall()]:
        await connection.execute(f"LOCK TABLE {', '.join(lockable)} IN {mode} MODE")


async def check_fired_unchanged(connection: Connection, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when other triggers, rules or event triggers would run than the question named."""
    now = await fired_code(connection, approved)
    if now == approved.runs:
        return
    reasons = [f"{name} would run" for name in now if name not in approved.runs]
    reasons += [f"{name} would not" for name in approved.runs if name not in now]
    raise ChangedSinceQuestion("; ".join(reasons))
