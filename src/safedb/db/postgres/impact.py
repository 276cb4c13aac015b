"""The impact preview: rows a data change would affect (a dry run that is rolled back), sizes for DDL.

A dry run is only made when rolling it back undoes everything: plain INSERT/UPDATE/DELETE/MERGE on
ordinary tables with no user trigger, rule or row-level security (the targets, the tables whose foreign
keys act on them, their children), where every function that runs is trusted (built in, or installed by
an extension) and has no effect a rollback cannot undo (a sequence never rolls back). That covers the
statement's own calls, and what PostgreSQL runs by itself: constraints, defaults, generated columns,
indexes and domains (`stored_code`). Otherwise the planner's estimate is shown, unless planning itself may
run an untrusted function (it folds and inlines functions): then neither. Every query here runs within
the preview time limit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import NamedTuple

import anyio
import psycopg

from safedb import wording
from safedb.db.backend import Impact, QueryLimits
from safedb.db.postgres import catalog, views
from safedb.db.postgres.connections import (
    CLIENT_GRACE_SECONDS,
    Connection,
    Pools,
    bounded,
    read_transaction,
    server_message,
)
from safedb.db.postgres.counting import count_is_a_read
from safedb.db.postgres.prepared import ReaderStatement
from safedb.db.postgres.results import run_counted
from safedb.db.postgres.row_changes import row_changes_line, row_counts, rows_changed_by_table
from safedb.db.postgres.shadowing import begin_catalog_work
from safedb.db.postgres.stored_code import EXTENSION_MEMBER, MET_TYPES, PATTERNS, REACHED_CODE
from safedb.sql.classification import ChangeKind, Classification, DatabaseObject, ObjectType
from safedb.sql.postgres_classifier import PostgresStatement
from safedb.sql.postgres_functions import (
    SEQUENCE_FUNCTIONS,
    CatalogFunction,
    planning_may_run,
    trusted,
    undone_by_rollback,
)
from safedb.sql.postgres_utility import OWNED_OBJECTS, SESSION_ROLES

logger = logging.getLogger(__name__)

_COUNT_ONLY = QueryLimits(max_rows=0)
"""A dry run counts the rows a statement returns and keeps none of them."""

DATA_KINDS = frozenset({ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.DELETE, ChangeKind.UPSERT, ChangeKind.MERGE})
"""Changes of rows: the statements a dry run counts."""
_MEASURED_KINDS = frozenset(
    {ChangeKind.DROP, ChangeKind.TRUNCATE, ChangeKind.ALTER, ChangeKind.RENAME, ChangeKind.CLUSTER,
     ChangeKind.VACUUM, ChangeKind.REINDEX, ChangeKind.LOCK, ChangeKind.REFRESH, ChangeKind.ANALYZE}
)  # fmt: skip
_RELATION_TYPES = frozenset({ObjectType.TABLE, ObjectType.MATERIALIZED_VIEW, ObjectType.INDEX})

# The tables a data change reaches: its targets, the tables whose foreign keys point at them (their keys'
# actions change rows there), and the children of all of these (inheritance, partitions).
CLOSURE = """
targets AS (
    SELECT to_regclass(name)::oid AS oid FROM unnest(%(targets)s::text[]) AS name WHERE to_regclass(name) IS NOT NULL
),
closure(oid) AS (
    SELECT oid FROM targets
    UNION
    SELECT linked.oid FROM closure, LATERAL (
        SELECT con.conrelid AS oid FROM pg_constraint con WHERE con.confrelid = closure.oid AND con.contype = 'f'
        UNION ALL
        SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = closure.oid
    ) AS linked
)"""

_OBSTACLES_SQL = f"""
WITH RECURSIVE {CLOSURE}
SELECT c.oid::regclass::text, c.relkind::text, c.oid IN (SELECT oid FROM targets),
       c.oid IN (SELECT to_regclass(name) FROM unnest(%(through_views)s::text[]) AS name),
       EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
       EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.ev_type <> '1'),  -- not a view's own query
       c.relrowsecurity AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid),
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
               AND a.attidentity <> ''),
       EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conrelid = c.oid AND con.contype = 'f'
               AND 'd' IN (con.confdeltype, con.confupdtype))
FROM closure JOIN pg_class c ON c.oid = closure.oid
"""


# The functions PostgreSQL runs for the reached tables (see `stored_code`): for each row written ('row':
# CHECK and exclusion constraints, generated columns, index expressions and predicates, row-security
# policies, partition keys (their own and their parents'), extended statistics' expressions, the domains of
# the columns), and where a column takes its default ('default').
_TABLE_CODE_SQL = f"""
WITH RECURSIVE {CLOSURE},
seed_trees(label, bucket, tree) AS (
    SELECT con.conrelid::regclass::text, 'row', con.conbin::text FROM pg_constraint con
    JOIN closure ON closure.oid = con.conrelid WHERE con.conbin IS NOT NULL
    UNION ALL
    SELECT d.adrelid::regclass::text, CASE WHEN a.attgenerated <> '' THEN 'row' ELSE 'default' END, d.adbin::text
    FROM pg_attrdef d JOIN closure ON closure.oid = d.adrelid
    JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    UNION ALL
    SELECT i.indrelid::regclass::text, 'row', e.tree FROM pg_index i JOIN closure ON closure.oid = i.indrelid
    CROSS JOIN LATERAL unnest(ARRAY[i.indexprs::text, i.indpred::text]) AS e(tree) WHERE e.tree IS NOT NULL
    UNION ALL
    SELECT p.polrelid::regclass::text, 'row', e.tree FROM pg_policy p JOIN closure ON closure.oid = p.polrelid
    CROSS JOIN LATERAL unnest(ARRAY[p.polqual::text, p.polwithcheck::text]) AS e(tree) WHERE e.tree IS NOT NULL
    UNION ALL
    SELECT closure.oid::regclass::text, 'row', t.partexprs::text FROM closure
    CROSS JOIN LATERAL pg_partition_ancestors(closure.oid) AS a(relid)  -- a partition's rows meet its parents' keys
    JOIN pg_partitioned_table t ON t.partrelid = a.relid WHERE t.partexprs IS NOT NULL
    UNION ALL  -- planning folds extended statistics' expressions
    SELECT x.stxrelid::regclass::text, 'row', x.stxexprs::text FROM pg_statistic_ext x
    JOIN closure ON closure.oid = x.stxrelid WHERE x.stxexprs IS NOT NULL
),
seed_types(label, bucket, oid) AS (
    SELECT a.attrelid::regclass::text, 'row', a.atttypid FROM pg_attribute a JOIN closure ON closure.oid = a.attrelid
    WHERE a.attnum > 0 AND NOT a.attisdropped
),
seed_functions(label, bucket, proc) AS (
    -- Exclusion constraints' operators, and the equality operators of foreign keys' checks.
    SELECT con.conrelid::regclass::text, 'row', o.oprcode::oid FROM pg_constraint con
    JOIN closure ON closure.oid = con.conrelid
    CROSS JOIN LATERAL unnest(con.conexclop || con.conpfeqop || con.conppeqop || con.conffeqop) AS x(op)
    JOIN pg_operator o ON o.oid = x.op
    UNION ALL  -- the user-defined support functions (a btree's comparison) of its indexes' operator classes
    SELECT i.indrelid::regclass::text, 'row', a.amproc::oid FROM pg_index i JOIN closure ON closure.oid = i.indrelid
    CROSS JOIN LATERAL unnest(i.indclass::oid[]) AS k(opclass) JOIN pg_opclass c ON c.oid = k.opclass
    JOIN pg_amproc a ON a.amprocfamily = c.opcfamily WHERE a.amproc::oid >= 16384
    UNION ALL  -- and of its partition keys' (its own and its parents'), which route each row written
    SELECT closure.oid::regclass::text, 'row', a.amproc::oid FROM closure
    CROSS JOIN LATERAL pg_partition_ancestors(closure.oid) AS ancestor(relid)
    JOIN pg_partitioned_table t ON t.partrelid = ancestor.relid
    CROSS JOIN LATERAL unnest(t.partclass::oid[]) AS k(opclass) JOIN pg_opclass c ON c.oid = k.opclass
    JOIN pg_amproc a ON a.amprocfamily = c.opcfamily WHERE a.amproc::oid >= 16384
),
{REACHED_CODE},
met_seed(oid) AS (SELECT oid FROM seed_types UNION SELECT oid FROM reached_types),
{MET_TYPES}
SELECT DISTINCT f.label, f.bucket, n.nspname, p.proname, p.provolatile::text, {EXTENSION_MEMBER},
       {catalog.DEFINITION_FINGERPRINT}
FROM code_functions f JOIN pg_proc p ON p.oid = f.proc JOIN pg_namespace n ON n.oid = p.pronamespace
UNION
SELECT f.label, 'always', n.nspname, p.proname, p.provolatile::text, {EXTENSION_MEMBER},
       {catalog.DEFINITION_FINGERPRINT}
FROM user_casts f JOIN pg_proc p ON p.oid = f.proc JOIN pg_namespace n ON n.oid = p.pronamespace
"""
# Prepared in each reader session: parsing and planning it took longer than running it (as `catalog._FUNCTIONS`).
_TABLE_CODE = ReaderStatement("safedb_table_code", _TABLE_CODE_SQL)

# Tables a foreign key carries the change to. Deletes travel on through ON DELETE CASCADE; updates of a
# key through ON UPDATE CASCADE (whether the statement changes a key is not known: "may"); TRUNCATE ...
# CASCADE empties every table that references an emptied one, whatever the key's action.
_CASCADE_SQL = """
WITH RECURSIVE reached(oid, action) AS (
    SELECT con.conrelid, con.{action}::text FROM pg_constraint con
    WHERE con.contype = 'f' AND con.{action} = ANY(%(actions)s::text[])
      AND con.confrelid IN (SELECT to_regclass(name) FROM unnest(%(targets)s::text[]) AS name)
    UNION
    SELECT con.conrelid, con.{action}::text FROM reached JOIN pg_constraint con ON con.confrelid = reached.oid
    WHERE con.contype = 'f' AND con.{action} = ANY(%(actions)s::text[]) AND reached.action = ANY(%(onward)s::text[])
)
SELECT oid::regclass::text, string_agg(DISTINCT action, '') FROM reached GROUP BY 1 ORDER BY 1
"""
# The tables beneath those named: their children (inheritance) and partitions, at any depth.
_DESCENDANTS_SQL = """
WITH RECURSIVE tree(oid) AS (
    SELECT i.inhrelid FROM pg_inherits i
    WHERE i.inhparent IN (SELECT to_regclass(name) FROM unnest(%(targets)s::text[]) AS name)
    UNION
    SELECT i.inhrelid FROM tree JOIN pg_inherits i ON i.inhparent = tree.oid
)
SELECT c.oid::regclass::text, c.relispartition FROM tree JOIN pg_class c ON c.oid = tree.oid ORDER BY 1
"""
_ACTION_NAMES = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}
_CHANGING_ACTIONS = ["c", "n", "d"]


@dataclass(frozen=True)
class _Cascade:
    action_column: str
    actions: list[str]
    """The key actions that carry the change to the referencing table..."""
    onward: list[str]
    """...and those that carry it on from there."""
    message: str
    show_actions: bool = True


_CASCADES = {
    ChangeKind.DELETE: _Cascade("confdeltype", _CHANGING_ACTIONS, ["c"], "Foreign keys carry the delete on to: {}."),
    ChangeKind.UPDATE: _Cascade(
        "confupdtype", _CHANGING_ACTIONS, ["c"], "If it changes a referenced key, foreign keys carry it on to: {}."
    ),
    ChangeKind.TRUNCATE: _Cascade(
        "confdeltype",
        list(_ACTION_NAMES),
        list(_ACTION_NAMES),
        "With CASCADE it also empties the tables that reference it: {}.",
        show_actions=False,
    ),
}

_DRY_RUN_LOCK_WAIT = "100ms"
_EVENT_TRIGGERS_SQL = "SELECT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtenabled <> 'D')"
_CASCADED = "drop cascades to "
_CASCADES_REPORTED_BY = "reportDependentObjects"  # PostgreSQL's function that reports them, in any language

_SIZE_SQL = """
SELECT c.relkind::text, pg_total_relation_size(c.oid), c.reltuples::bigint, c.relrowsecurity FROM pg_class c
WHERE c.oid = to_regclass(%(name)s)
"""
_SCHEMA_SQL = """
SELECT count(*), coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(name)s AND c.relkind IN ('r', 'p', 'm')
"""
_DATABASE_SQL = "SELECT pg_database_size(d.oid) FROM pg_database d WHERE d.datname = %(name)s"
# What DROP OWNED BY drops in the current database: the role's relations, schemas, routines and types
# (the row types of its tables go with the tables).
_OWNED_SQL = """
WITH owner AS (SELECT oid FROM pg_roles WHERE rolname = %(name)s)
SELECT kind, name, size FROM (
    SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence'
                          WHEN 'f' THEN 'foreign table' ELSE 'table' END AS kind,
           c.oid::regclass::text AS name, pg_total_relation_size(c.oid) AS size
    FROM pg_class c WHERE c.relowner IN (SELECT oid FROM owner) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
    UNION ALL
    SELECT 'schema', quote_ident(n.nspname), 0 FROM pg_namespace n WHERE n.nspowner IN (SELECT oid FROM owner)
    UNION ALL
    SELECT CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END, p.oid::regprocedure::text, 0
    FROM pg_proc p WHERE p.proowner IN (SELECT oid FROM owner)
    UNION ALL
    SELECT 'type', t.oid::regtype::text, 0 FROM pg_type t
    WHERE t.typowner IN (SELECT oid FROM owner) AND t.typtype IN ('c', 'd', 'e', 'r', 'm')
      AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.reltype = t.oid AND c.relkind <> 'c')
      AND NOT EXISTS (SELECT 1 FROM pg_type a WHERE a.typarray = t.oid)
) AS owned ORDER BY kind, name
"""
# Names listed per kind of object in a preview line; past that, a count.
_NAMES_SHOWN = 10


@dataclass(frozen=True)
class _Obstacle:
    relation: str
    reason: str
    blocks_planning: bool = False
    """Planning the statement may run code a rollback does not undo, so not even `EXPLAIN` is made."""


async def measure_impact(
    pools: Pools, statement: PostgresStatement, classification: Classification, limits: QueryLimits
) -> Impact:
    """Measure without keeping anything; a preview that cannot finish says why instead of raising."""
    seconds = limits.preview_timeout
    try:
        with anyio.fail_after(seconds + CLIENT_GRACE_SECONDS):
            data_change = bool(classification.kinds) and set(classification.kinds) <= DATA_KINDS
            obstacles: list[_Obstacle] = []
            object_lines: list[str] = []
            view_notes: tuple[str, ...] = ()
            # The catalog lookups share one read-only session; dry runs and estimates need the writer.
            async with pools.reader() as reader, read_transaction(reader):
                await begin_catalog_work(reader, seconds)
                await catalog.for_catalog_queries(reader)
                if data_change:
                    obstacles = await _obstacles(reader, statement, classification)
                    # A view PostgreSQL does not change by itself: who does, or that PostgreSQL will refuse.
                    view_notes = (await views.through_views(reader, statement.classification)).notes
                else:
                    object_lines = await _object_lines(reader, classification, pools)
            if data_change:
                impact = await _data_impact(pools, statement, classification, obstacles, seconds)
                impact = replace(impact, lines=(*impact.lines, *view_notes))
            elif changed := [kind for kind in classification.kinds if kind in DATA_KINDS]:
                # With a sequence, a lock or a function call besides: neither a dry run nor planning is safe.
                verbs = ", ".join(str(kind) for kind in changed)
                others = ", ".join(str(kind) for kind in classification.kinds if kind not in DATA_KINDS)
                line = (
                    f"no dry run and no planner's estimate ({verbs}, with {others}: effects a rollback may not undo)."
                )
                impact = Impact(lines=(line, *object_lines))
            else:
                impact = Impact(lines=tuple(object_lines))
            if statement.drops_dependents and statement.in_transaction:
                drop_lines, drops = await _drop_lines(pools, statement, seconds)
                return replace(impact, lines=(*impact.lines, *classification.cascades, *drop_lines), drops=drops)
            return replace(impact, lines=(*impact.lines, *classification.cascades))
    except TimeoutError:
        return Impact(lines=(f"the dry run did not finish within the {seconds:g} s time limit.",))
    except psycopg.Error as exc:
        reason = server_message(exc)
        return Impact(lines=(f"the dry run did not finish (PostgreSQL reported: {reason}).",))


def quoted_tables(classification: Classification) -> list[str]:
    """The tables the statement changes, quoted as names in a statement."""
    return [_quoted(target) for target in classification.touched if target.type is ObjectType.TABLE]


_NAMED_RELATION_TYPES = frozenset(
    {ObjectType.TABLE, ObjectType.VIEW, ObjectType.MATERIALIZED_VIEW, ObjectType.SEQUENCE, ObjectType.INDEX}
)


def quoted_relations(classification: Classification) -> list[str]:
    """The tables, views, sequences and indexes the statement touches, quoted as names in a statement."""
    return [_quoted(target) for target in classification.touched if target.type in _NAMED_RELATION_TYPES]


def quoted_targets(classification: Classification, kinds: frozenset[ChangeKind] | set[ChangeKind]) -> list[str]:
    """The tables the statement changes in one of `kinds`, quoted as names in a statement."""
    changed = dict.fromkeys(change.target for change in classification.changes if change.kind in kinds)
    return [_quoted(target) for target in changed if target.type is ObjectType.TABLE]


def _quoted(target: DatabaseObject) -> str:
    parts = [part for part in (target.schema, target.name) if part is not None]
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


class _Reached(NamedTuple):
    """A table a data change reaches, as `_OBSTACLES_SQL` describes it."""

    name: str
    kind: str
    is_target: bool
    changed_beneath: bool
    """A view PostgreSQL changes by changing the relation beneath it, which is among the targets."""
    triggers: bool
    rules: bool
    row_security: bool
    identity: bool
    sets_defaults: bool
    """A foreign key of this table sets rows to their defaults (ON DELETE/UPDATE SET DEFAULT)."""


async def _obstacles(
    connection: Connection, statement: PostgresStatement, classification: Classification
) -> list[_Obstacle]:
    found: list[_Obstacle] = []
    targets = {"targets": quoted_tables(classification)}
    through_views = [_quoted(link.view) for link in classification.through_views]
    cursor = await connection.execute(_OBSTACLES_SQL, {**targets, "through_views": through_views})
    reached = [_Reached(*row) for row in await cursor.fetchall()]
    for table in reached:
        if table.kind not in ("r", "p") and not table.changed_beneath:
            # What such a relation runs (a foreign table's handler, an INSTEAD OF trigger's function) and the tables
            # beneath it (their defaults, which the planner folds) are not examined here.
            found.append(_Obstacle(table.name, "it is not an ordinary table", blocks_planning=True))
        if table.triggers:
            found.append(_Obstacle(table.name, "it has triggers"))
        if table.rules:
            # Planning takes in the rules' actions, and folds what they call.
            found.append(_Obstacle(table.name, "it has rules", blocks_planning=True))
        if table.row_security:
            # Its policies may read views, whose functions the scan of stored code below does not follow.
            found.append(_Obstacle(table.name, "it has row-level security policies", blocks_planning=True))
    # Rows are written by the statement (a DELETE writes none) and by foreign keys' actions; defaults are
    # computed for the statement's own rows, and for rows a foreign key sets to default.
    writes_rows = bool(set(classification.kinds) - {ChangeKind.DELETE})
    writing = {table.name for table in reached if writes_rows or not table.is_target}
    defaulting = {t.name for t in reached if t.sets_defaults or (t.is_target and statement.uses_default)}
    for table in reached:
        if table.identity and table.name in defaulting:
            found.append(
                _Obstacle(table.name, "an identity column draws from a sequence, which a rollback does not undo")
            )
    for name, bucket, schema, function_name, volatility, extension, _ in await _TABLE_CODE.rows(
        connection, {**targets, **PATTERNS}
    ):
        function = CatalogFunction.from_stored_code(schema, function_name, volatility, extension)
        if undone_by_rollback(function):
            continue
        planning = planning_may_run(function)
        if bucket == "default" and name in defaulting:
            found.append(_Obstacle(name, f"a column default calls {_described(function)}", planning))
        elif bucket == "row" and name in writing:
            place = "its constraints, generated columns, indexes or column types call"
            found.append(_Obstacle(name, f"{place} {_described(function)} for each row written", planning))
        elif bucket == "always":  # a cast PostgreSQL may apply anywhere, a foreign key's check too
            found.append(_Obstacle(name, f"calls {_described(function)}", planning))
        elif planning:
            # Not run by this statement, but planning it may fold or inline the function.
            found.append(_Obstacle(name, f"planning may call {_described(function)}", planning))
    functions = await catalog.function_facts(connection, [statement])
    for function in functions:
        if not undone_by_rollback(function):
            via = f" (through {function.via})" if function.via else ""
            found.append(_Obstacle(function.name, f"{_described(function)}{via}", planning_may_run(function)))
    return found


_PLACES = {
    "row": "its constraints, generated columns, indexes or column types call",
    "default": "a column default calls",
    "always": "calls",  # a cast PostgreSQL may apply anywhere, a foreign key's check
}


async def stored_code_calls(connection: Connection, classification: Classification) -> tuple[tuple[str, ...], bool]:
    """What the stored code of the tables a data change reaches (its targets, the tables beneath the views it
    changes, those its foreign keys' actions change, their children) calls that a rollback may not undo, each with
    a fingerprint of a user-defined function's definition; sorted. A default, constraint or index added while a
    person decides, or a function of one replaced, runs code nobody saw: an approval holds only for these. And
    whether one of them is a user-defined function, whose effects are not judged."""
    rows = await _TABLE_CODE.rows(connection, {"targets": quoted_tables(classification), **PATTERNS})
    found: set[str] = set()
    user_defined = False
    for name, bucket, schema, function_name, volatility, extension, definition in rows:
        function = CatalogFunction.from_stored_code(schema, function_name, volatility, extension)
        if not undone_by_rollback(function):
            fingerprint = f" (definition {definition})" if definition else ""
            found.add(f"{name}: {_PLACES[bucket]} {_described(function)}{fingerprint}")
            user_defined = user_defined or not trusted(function)
    return tuple(sorted(found)), user_defined


async def changed_since_dry_run(
    connection: Connection, statement: PostgresStatement, classification: Classification
) -> list[str]:
    """Why the statement no longer qualifies for the dry run its question showed (none: it still does).

    Run in the approved statement's transaction, just before it: an approval of a dry run's count was given for a
    change that runs no code but what the preview judged, and someone may have added a trigger, a rule, a policy
    or a default to a table since. The targets are locked first (ROW EXCLUSIVE, as the statement itself takes
    them), so none of these can be added to them between this check and the statement. The caller has called
    `catalog.for_catalog_queries`.
    """
    if targets := quoted_tables(classification):
        await connection.execute(f"LOCK TABLE {', '.join(targets)} IN ROW EXCLUSIVE MODE")
    obstacles = await _obstacles(connection, statement, classification)
    return [f"{o.relation}: {o.reason}" for o in obstacles]


def _described(function: CatalogFunction) -> str:
    if not trusted(function):
        return f"the user-defined function {function.name}, which a rollback may not undo"
    if function.name in SEQUENCE_FUNCTIONS:
        return f"{function.name}(), which moves a sequence; a rollback does not undo that"
    return f"{function.name}(), whose effects a rollback does not undo"


async def _dry_run_count(connection: Connection, statement: PostgresStatement) -> int:
    """Run the statement (in the caller's transaction, which rolls back) and count what PostgreSQL counts.

    The rows a data change returns (RETURNING) are counted in PostgreSQL, never fetched: this runs before
    anyone approved the statement. Where PostgreSQL refuses the statement in a WITH (one with a WITH of its
    own that changes data; tables with rules get no dry run), they are fetched a row at a time and dropped.
    """
    if statement.returns_rows and statement.root != "SelectStmt":
        cursor = connection.cursor()
        try:
            # A savepoint, for when PostgreSQL refuses the WITH; the pipeline sends one statement only.
            async with connection.transaction(), connection.pipeline():
                await cursor.execute(
                    f"WITH safedb_dry_run AS (\n{statement.text}\n) SELECT pg_catalog.count(*) FROM safedb_dry_run"
                )
            counted = await cursor.fetchone()
            return int(counted[0]) if counted else 0
        except psycopg.errors.FeatureNotSupported:
            pass
    count, _ = await run_counted(connection, statement, _COUNT_ONLY)
    return count


# A dry run writes what the statement writes before anyone has approved it, and the rollback gives none of it
# back: the new row versions stay in the table's file (dead, until VACUUM; the file does not shrink) and WAL logs
# them again. So there is a dry run only when the planner expects it to write at most this much: more than any
# change a person checks row by row (some hundred thousand narrow rows), a small part of what a dry run could
# write in its time limit (about 1 GB in 5 s), and little for a disk even when an agent repeats it.
_DRY_RUN_MAX_BYTES = 32 * 1024 * 1024
# What a row written costs besides its values, which the plan's width leaves out: its header (23 bytes, aligned
# to 24) and its line pointer (4), padded.
_ROW_OVERHEAD_BYTES = 32
# The average stored row (header included) of the widest of the targets PostgreSQL has counted (VACUUM, ANALYZE):
# an UPDATE writes whole new rows though its plan carries only the changed columns, and a DELETE changes each row
# it removes where it is, and logs each page it changes whole the first time after a checkpoint.
_STORED_ROW_SQL = """
SELECT pg_catalog.max(pg_catalog.pg_relation_size(c.oid)::float8 / c.reltuples)::bigint FROM pg_catalog.pg_class c
WHERE c.oid IN (SELECT pg_catalog.to_regclass(name) FROM pg_catalog.unnest(%(targets)s::text[]) AS name)
  AND c.reltuples > 0
"""
# PostgreSQL cannot EXPLAIN an EXPLAIN: what the dry run of an EXPLAIN ANALYZE (which runs the statement) would
# write is not known beforehand.
_UNPLANNED = (
    "EXPLAIN ANALYZE reports its plan, not how many rows the statement changes, and PostgreSQL cannot estimate "
    "beforehand what its dry run would write"
)


async def _data_impact(
    pools: Pools,
    statement: PostgresStatement,
    classification: Classification,
    obstacles: list[_Obstacle],
    seconds: float,
) -> Impact:
    verbs = ", ".join(str(kind) for kind in classification.kinds)
    if obstacles:
        reasons = "; ".join(f"{o.relation}: {o.reason}" for o in obstacles)
        if any(o.blocks_planning for o in obstacles):
            line = f"no dry run and no planner's estimate ({verbs}; {reasons})."
            return Impact(lines=(line,))
        return _estimate_only(await _planner_estimate(pools, statement, seconds), verbs, reasons)
    async with pools.writer() as connection, connection.transaction(force_rollback=True):
        await begin_catalog_work(connection, seconds)
        # Planned in the dry run's own transaction (nothing runs: no more than the dry run would plan anyway).
        explained = await _explained(connection, statement, quoted_tables(classification))
        if explained is None and not statement.plans_write_rules:  # a plain EXPLAIN (`plans_write_rules`) only plans
            return Impact(lines=(f"no dry run and no planner's estimate ({verbs}; {_UNPLANNED}).",))
        if explained is not None and (reason := _too_much_to_write(explained)):
            return _estimate_only(_plan_rows(explained.plan), verbs, reason)
        counted_before = await row_counts(connection)
        try:
            rows = max(await _dry_run_count(connection, statement), 0)
        except psycopg.Error as exc:
            if (exc.sqlstate or "").startswith(_CIRCUMSTANCES):
                raise  # the preview says the dry run did not finish, and binds nothing
            return _failed_dry_run(verbs, server_message(exc))
        row_changes = rows_changed_by_table(counted_before, await row_counts(connection))
    if not statement.counts_changed_rows:
        # `WITH d AS (DELETE ...) SELECT count(*) FROM d`: PostgreSQL counts the rows the SELECT returns;
        # `EXPLAIN ANALYZE DELETE ...`: the lines of the plan.
        uncounted = (
            "EXPLAIN ANALYZE reports its plan, not how many rows the statement changes"
            if statement.root == "ExplainStmt"
            else "PostgreSQL does not report how many rows the data-modifying queries in its WITH clause change"
        )
        line = f"the dry run ({verbs}) finished and was rolled back; {uncounted}."
        return Impact(lines=(line,))
    line = f"{wording.rows(rows)} would be affected ({verbs}), measured by a dry run that was rolled back."
    return Impact(lines=(line, row_changes_line(row_changes)), rows_affected=rows, row_changes=row_changes)


# Errors of the moment rather than of the statement (SQLSTATE classes): a serialization failure or deadlock, too
# little memory or disk, a lock not available, a time limit or cancel, a lost connection, a system or internal error.
_CIRCUMSTANCES = ("40", "53", "55", "57", "58", "08", "XX")


def _failed_dry_run(verbs: str, reason: str) -> Impact:
    """A dry run the statement itself made fail (a division by zero, a CHECK): it changed nothing, and an approval holds
    it to nothing. A statement can tell its dry run from its run (a setting, the time it takes), and failing only in
    the dry run would otherwise leave no count to hold the approved run to."""
    line = (
        f"the dry run ({verbs}) failed (PostgreSQL reported: {reason}) and changed nothing: approved, the statement "
        "may change no rows either."
    )
    return Impact(lines=(line, row_changes_line(())), rows_affected=0, row_changes=())


def _too_much_to_write(explained: _Explained) -> str | None:
    """Why a dry run would write too much, by the planner's estimate, to be made; None when it may be made."""
    written = _written_bytes(explained.plan, explained.stored_row_bytes)
    if written is None:
        return "what it would write is not known: PostgreSQL's plan could not be read"
    if written > _DRY_RUN_MAX_BYTES:
        return (
            f"it would write about {_bytes(written)}, more than a dry run may write before anyone approves the "
            f"statement ({_bytes(_DRY_RUN_MAX_BYTES)})"
        )
    return None


def _estimate_only(estimate: int | None, verbs: str, reason: str) -> Impact:
    """The planner's estimate instead of a dry run, and why: it binds no count (`Impact.rows_affected`)."""
    about = f"about {wording.rows(estimate)}" if estimate is not None else "an unknown number of rows"
    line = f"{about} would be affected ({verbs}), by the planner's estimate; no dry run ({reason})."
    return Impact(lines=(line,))


async def cascade_lines(connection: Connection, classification: Classification) -> tuple[str, ...]:
    """The tables foreign keys carry a DELETE, an UPDATE or a TRUNCATE to, which the statement does not name, and
    those beneath a table it empties or drops, as the question shows them (`Classification.cascades`)."""
    lines = []
    for kind, cascade in _CASCADES.items():
        if not (targets := quoted_targets(classification, {kind})):
            continue
        cursor = await connection.execute(
            _CASCADE_SQL.format(action=cascade.action_column),
            {"targets": targets, "actions": cascade.actions, "onward": cascade.onward},
        )
        reached = [
            f"{name} ({', '.join(_ACTION_NAMES[a] for a in actions)})" if cascade.show_actions else name
            for name, actions in await cursor.fetchall()
        ]
        if reached:
            lines.append(cascade.message.format(", ".join(reached)))
    # A TRUNCATE empties the tables beneath a table too, and a DROP drops its partitions (children by inheritance
    # only with CASCADE, which PostgreSQL then reports as it does every other dependent: `Impact.drops`).
    if targets := quoted_targets(classification, {ChangeKind.TRUNCATE}):
        cursor = await connection.execute(_DESCENDANTS_SQL, {"targets": targets})
        if beneath := [name for name, _ in await cursor.fetchall()]:
            listed = ", ".join(beneath)
            lines.append(
                f"Unless it says ONLY, it also empties the tables that inherit from it or are its partitions: {listed}."
            )
    if targets := quoted_targets(classification, {ChangeKind.DROP}):
        cursor = await connection.execute(_DESCENDANTS_SQL, {"targets": targets})
        if partitions := [name for name, is_partition in await cursor.fetchall() if is_partition]:
            lines.append(f"It also drops its partitions: {', '.join(partitions)}.")
    return tuple(lines)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown if len(names) <= _NAMES_SHOWN else f"{shown} and {len(names) - _NAMES_SHOWN} more"


@contextmanager
def cascades_reported(connection: Connection) -> Iterator[list[str]]:
    """What PostgreSQL reports the statements run on `connection` meanwhile drop with what they drop (`CASCADE`), as
    it reports it: one object ("drop cascades to view v"), or several, listed in the notice's detail (the first
    100, then "and 5 other objects (see server log for list)"). The caller sets `client_min_messages` to notice."""
    dropped: list[str] = []

    def note(notice: psycopg.errors.Diagnostic) -> None:
        primary = notice.message_primary or ""
        # Known by the function that reports it too: a server (or a database or role setting) may have its
        # messages in another language (`lc_messages`), where the English words would match nothing, so a DROP
        # would take all it takes unshown. Those are kept in the server's words.
        if primary.startswith(_CASCADED) or notice.source_function == _CASCADES_REPORTED_BY:
            lines = notice.message_detail.splitlines() if notice.message_detail else [primary]
            dropped.extend(line.removeprefix(_CASCADED) for line in lines)

    connection.add_notice_handler(note)
    try:
        yield dropped
    finally:
        connection.remove_notice_handler(note)


async def _drop_lines(
    pools: Pools, statement: PostgresStatement, seconds: float
) -> tuple[list[str], tuple[str, ...] | None]:
    """What a DROP takes with it (`CASCADE`), or that PostgreSQL will refuse it, as PostgreSQL itself reports
    from a dry run that is rolled back: the question's lines, and what it drops besides (None without a dry run,
    which is not made while event triggers exist: they could act on the drop)."""
    async with pools.writer() as connection:
        try:
            with cascades_reported(connection) as dropped:
                async with connection.transaction(force_rollback=True):
                    await begin_catalog_work(connection, seconds)
                    # A DROP waits for its ACCESS EXCLUSIVE lock, and every session that comes after waits
                    # behind it: the dry run takes the lock at once or not at all.
                    await connection.execute("SELECT set_config('lock_timeout', %s, true)", (_DRY_RUN_LOCK_WAIT,))
                    cursor = await connection.execute(_EVENT_TRIGGERS_SQL)
                    row = await cursor.fetchone()
                    if row is None or row[0]:
                        return [], None
                    await connection.execute("SET LOCAL client_min_messages = notice")
                    cursor = connection.cursor()
                    async with connection.pipeline():
                        await cursor.execute(statement.text)
        except psycopg.errors.DependentObjectsStillExist as exc:
            detail = (exc.diag.message_detail or "").replace("\n", "; ")
            return [f"PostgreSQL will refuse this DROP: {server_message(exc)} ({bounded(detail)})."], None
        except psycopg.Error as exc:
            # Held to nothing more, not left unbound: a read that needs no approval, holding the table past the dry
            # run's lock wait, kept a DROP's question from listing what it takes with it.
            line = (
                f"the DROP's dry run did not finish (PostgreSQL reported: {server_message(exc)}), so it shows nothing "
                "the DROP takes with it: an approval holds it to dropping nothing more than it names."
            )
            return [line], ()
    return ([f"It also drops: {'; '.join(dropped)}."] if dropped else []), tuple(dropped)


async def _planner_estimate(pools: Pools, statement: PostgresStatement, seconds: float) -> int | None:
    """EXPLAIN (no ANALYZE: nothing runs) in a read-only transaction on the writer, which may plan the change."""
    async with pools.writer() as connection, connection.transaction(force_rollback=True):
        await connection.execute("SET TRANSACTION READ ONLY")
        # Its time limits, and that the writer still searches the schemas the checks searched.
        await begin_catalog_work(connection, seconds)
        explained = await _explained(connection, statement)
    return _plan_rows(explained.plan) if explained is not None else None


class _Explained(NamedTuple):
    plan: object
    """EXPLAIN (FORMAT JSON)'s document."""
    stored_row_bytes: int
    """The average stored row of the widest target (`_STORED_ROW_SQL`); 0 when unknown or not asked."""


async def _explained(
    connection: Connection, statement: PostgresStatement, targets: list[str] | None = None
) -> _Explained | None:
    """The statement's plan (EXPLAIN without ANALYZE: nothing runs) and, given `targets`, the size of their stored
    rows, in one round trip; None for an EXPLAIN, which PostgreSQL cannot explain."""
    if statement.root == "ExplainStmt":
        return None
    plan_cursor = connection.cursor()
    size_cursor = connection.cursor()
    async with connection.pipeline():  # extended protocol: one statement in the text only
        await plan_cursor.execute("EXPLAIN (FORMAT JSON) " + statement.text)
        if targets:
            await size_cursor.execute(_STORED_ROW_SQL, {"targets": targets})
    plan = await plan_cursor.fetchone()
    size = await size_cursor.fetchone() if targets else None
    return _Explained(plan[0] if plan else None, int(size[0] or 0) if size else 0)


def _plan_rows(document: object) -> int | None:
    """The rows the plan's data changes take in (the rows they change), or without any, the rows it returns."""
    plan = _top_plan(document)
    if plan is None:
        return None
    if changed := _changed_inputs(plan):
        return sum(_number(node, "Plan Rows") for node in changed)
    rows = plan.get("Plan Rows")
    return int(rows) if isinstance(rows, int | float) else None


def _written_bytes(document: object, stored_row_bytes: int) -> int | None:
    """About how much the plan's data changes write: each row they change, at least as wide as a stored row."""
    plan = _top_plan(document)
    if plan is None:
        return None
    return sum(
        _number(node, "Plan Rows") * max(_number(node, "Plan Width") + _ROW_OVERHEAD_BYTES, stored_row_bytes)
        for node in _changed_inputs(plan)
    )


def _top_plan(document: object) -> dict[str, object] | None:
    plans = json.loads(document) if isinstance(document, str) else document
    if not isinstance(plans, list) or not plans or not isinstance(plans[0], dict):
        return None
    plan = plans[0].get("Plan")
    return plan if isinstance(plan, dict) else None


def _changed_inputs(plan: dict[str, object]) -> list[dict[str, object]]:
    """The input of each ModifyTable node, at any depth (a WITH's data change sits below the query that reads it):
    the rows it changes. Its other children (InitPlan, SubPlan) only compute values."""
    found: list[dict[str, object]] = []
    pending = [plan]
    while pending:  # no recursion: a plan can be deeper than Python's stack
        node = pending.pop()
        children = [child for child in _children(node) if isinstance(child, dict)]
        if node.get("Node Type") == "ModifyTable":
            found.extend(child for child in children if child.get("Parent Relationship") == "Outer")
        pending.extend(children)
    return found


def _children(node: dict[str, object]) -> list[object]:
    children = node.get("Plans")
    return children if isinstance(children, list) else []


def _number(node: dict[str, object], key: str) -> int:
    value = node.get(key)
    return int(value) if isinstance(value, int | float) else 0


async def _object_lines(connection: Connection, classification: Classification, pools: Pools) -> list[str]:
    lines = []
    for change in classification.changes:
        if change.kind is ChangeKind.DROP and change.detail == OWNED_OBJECTS:
            lines.append(await _owned_line(connection, await _role_name(pools, change.target.name)))
        elif change.kind in _MEASURED_KINDS and (line := await _object_line(connection, change.kind, change.target)):
            lines.append(line)
    return lines


async def _role_name(pools: Pools, name: str) -> str:
    """`name`, or for CURRENT_USER and the like the role changes run as (the preview reads as another role)."""
    if name not in SESSION_ROLES:
        return name
    async with pools.writer() as writer:
        row = await (await writer.execute("SELECT current_user")).fetchone()
    return str(row[0]) if row else name


async def _owned_line(connection: Connection, role: str) -> str:
    """Everything DROP OWNED BY drops in this database, by kind, with the tables' total size."""
    cursor = await connection.execute(_OWNED_SQL, {"name": role})
    owned: dict[str, list[str]] = {}
    total_size = 0
    for kind, name, size in await cursor.fetchall():
        owned.setdefault(kind, []).append(name)
        total_size += int(size or 0)
    if not owned:
        return f"DROP OWNED BY {role}: it owns nothing in this database; only its privileges are revoked."
    parts = []
    for kind, names in owned.items():
        parts.append(f"{wording.count(len(names), kind)} ({_listed(names)})")
    return (
        f"DROP OWNED BY {role} drops everything it owns in this database, {_bytes(total_size)} in all, "
        f"and revokes its privileges: {'; '.join(parts)}."
    )


async def _object_line(connection: Connection, kind: ChangeKind, target: DatabaseObject) -> str | None:
    verb = str(kind).upper()
    if target.type in _RELATION_TYPES:
        cursor = await connection.execute(_SIZE_SQL, {"name": _quoted(target)})
        row = await cursor.fetchone()
        if row is None:
            return None
        relkind, size, estimate, row_security = row
        # Counting would run the table's policies, and planning it folds the code stored with it (partition
        # keys, statistics, indexes): the estimate then, unless counting is a read SafeDB would run at once.
        counted = relkind in ("r", "p", "m") and not row_security and await count_is_a_read(connection, _quoted(target))
        count = await _exact_count(connection, target) if counted else None
        rows = wording.rows(count) if count is not None else f"about {wording.rows(max(int(estimate), 0))}"
        held = f"{rows}, {_bytes(int(size))}" if relkind in ("r", "p", "m") else _bytes(int(size))
        if kind in (ChangeKind.DROP, ChangeKind.TRUNCATE):
            return f"{verb} {target}: {held} will be lost."
        return f"{verb} {target}: it holds {held}."
    if target.type is ObjectType.SCHEMA and kind is ChangeKind.DROP:
        cursor = await connection.execute(_SCHEMA_SQL, {"name": target.name})
        row = await cursor.fetchone()
        if row is not None:
            return f"DROP {target}: it holds {row[0]} tables and materialized views, {_bytes(int(row[1]))}."
    if target.type is ObjectType.DATABASE and kind is ChangeKind.DROP:
        cursor = await connection.execute(_DATABASE_SQL, {"name": target.name})
        row = await cursor.fetchone()
        if row is not None:
            return f"DROP {target}: {_bytes(int(row[0]))} will be lost."
    return None


async def _exact_count(connection: Connection, target: DatabaseObject) -> int | None:
    """count(*) inside a savepoint, so a table too big to count in time falls back to the estimate."""
    try:
        async with connection.transaction():
            await catalog.with_session_settings(connection)
            cursor = await connection.execute(f"SELECT count(*) FROM {_quoted(target)}")
            row = await cursor.fetchone()
    except psycopg.errors.QueryCanceled:
        return None
    return int(row[0]) if row else None


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"
