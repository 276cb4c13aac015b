"""Catalog queries (all with bound parameters): function volatility, tables, columns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from psycopg import sql
from psycopg.errors import LockNotAvailable, QueryCanceled
from psycopg.types.numeric import Oid

from safedb.db.backend import ColumnInfo
from safedb.db.postgres.connections import Connection, quoted, set_statement_timeout
from safedb.db.postgres.prepared import ReaderStatement
from safedb.db.postgres.stored_code import EXTENSION_MEMBER, MET_TYPES, PATTERNS, REACHED_CODE
from safedb.sql.postgres_classifier import PostgresStatement
from safedb.sql.postgres_functions import UNINTERRUPTIBLE_FUNCTIONS, CatalogFunction

# The volatility of the function `p` (a `pg_proc` row). An aggregate is recorded as immutable whatever it
# calls: it is as volatile as its support functions.
_AGGREGATE_SUPPORT = """a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn, a.aggmtransfn,
    a.aggminvtransfn, a.aggmfinalfn"""
_VOLATILITY = f"""CASE WHEN p.prokind = 'a' THEN (
        SELECT CASE WHEN bool_or(s.provolatile = 'v') THEN 'v' WHEN bool_or(s.provolatile = 's') THEN 's' ELSE 'i' END
        FROM pg_aggregate a JOIN pg_proc s ON s.oid IN ({_AGGREGATE_SUPPORT})
        WHERE a.aggfnoid = p.oid) ELSE p.provolatile::text END"""

# An operator's volatility: that of its function, but volatile (so it asks) for a function whose work PostgreSQL cannot
# stop (pg_trgm's word similarity behind `<%`...), which an operator row, named by its symbol, cannot be told by.
_UNINTERRUPTIBLE = ", ".join("'" + name + "'" for name in sorted(UNINTERRUPTIBLE_FUNCTIONS))
_OPERATOR_VOLATILITY = f"CASE WHEN p.proname IN ({_UNINTERRUPTIBLE}) THEN 'v' ELSE {_VOLATILITY} END"


# Functions by name (for calls and attribute notation) and by operator (for user-defined operators, with
# their negators and commutators, which the planner may apply instead); the functions the statement's user
# views (through nested views) and row-security policies call, read from their stored expressions (see
# `stored_code`: built-ins too), those the defaults of the named functions' parameters call, and those of
# the domains it converts to; and the user-defined casts from or to the types it meets, which PostgreSQL may
# apply unasked (assignment and implicit casts do not show in the statement). The types it meets: those it
# casts to, the named functions' parameter and result types, its relations' row types and columns, and
# every type inside these (`stored_code.MET_TYPES`), and what the named operators return. A cast or an
# operator of a user-defined type counts only where the statement meets that type, except an operator
# applied to untyped literals only (`open_operators`), or to one beside a typed value (`half_open_operators`:
# where the other operand's type may be met). The user-defined functions of the default operator families of
# the types met (a btree class's comparison sorts unasked) and of those holding an operator that counts
# (`ORDER BY x USING op` sorts with its family's comparison), and the handlers of the foreign tables read.
# A relation read brings its inheritance children and partitions (a read scans them, a foreign one on its
# server), and the functions its index expressions and predicates, check constraints, partition keys (its
# own and its parents') and extended statistics' expressions call: planning folds constants there when it
# loads them (constraint exclusion reads the checks); and the domains of its columns, whose checks run when
# a value is converted to its row type. An EXPLAIN of a data change also plans its tables' rules for that
# change, and the defaults of the tables they write to.
_FUNCTIONS_SQL = f"""
WITH RECURSIVE
user_rels(oid, relname, reltype) AS (
    SELECT c.oid, c.relname::text, c.reltype FROM unnest(%(relations)s::text[]) AS name
    JOIN pg_class c ON c.oid = to_regclass(name)
    WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
    UNION
    SELECT c.oid, c.relname::text, c.reltype FROM user_rels r
    CROSS JOIN LATERAL (
        SELECT m[1]::oid FROM (
            SELECT w.ev_action::text AS tree FROM pg_rewrite w
            WHERE w.ev_class = r.oid AND (w.ev_type = '1' AND %(view_queries)s OR %(write_rules)s)
            UNION ALL
            SELECT e.tree FROM pg_policy p
            CROSS JOIN LATERAL unnest(ARRAY[p.polqual::text, p.polwithcheck::text]) AS e(tree)
            WHERE p.polrelid = r.oid AND e.tree IS NOT NULL
        ) AS code
        CROSS JOIN LATERAL regexp_matches(code.tree, %(relation_oids)s, 'g') AS m
        UNION ALL  -- a read of a table scans its inheritance children and partitions too
        SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = r.oid
    ) AS next(oid)
    JOIN pg_class c ON c.oid = next.oid
    WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
),
rule_targets(oid) AS (  -- an explained write plans its targets' rules, and the defaults of what they write to
    SELECT m[1]::oid FROM user_rels r JOIN pg_rewrite w ON w.ev_class = r.oid AND w.ev_type <> '1'
    CROSS JOIN LATERAL regexp_matches(w.ev_action::text, %(relation_oids)s, 'g') AS m
    WHERE %(write_rules)s
),
seed_trees(label, bucket, tree) AS (
    SELECT 'the defaults of ' || p.proname, 'row', p.proargdefaults::text FROM pg_proc p
    WHERE p.proname = ANY(%(functions)s::text[]) AND p.proargdefaults IS NOT NULL
    UNION ALL
    SELECT r.relname, 'row', w.ev_action::text FROM user_rels r
    JOIN pg_rewrite w ON w.ev_class = r.oid AND (w.ev_type = '1' AND %(view_queries)s OR %(write_rules)s)
    UNION ALL
    SELECT d.adrelid::regclass::text, 'row', d.adbin::text FROM pg_attrdef d
    WHERE d.adrelid IN (SELECT oid FROM rule_targets)
    UNION ALL
    SELECT r.relname, 'row', e.tree FROM user_rels r JOIN pg_policy p ON p.polrelid = r.oid
    CROSS JOIN LATERAL unnest(ARRAY[p.polqual::text, p.polwithcheck::text]) AS e(tree) WHERE e.tree IS NOT NULL
    UNION ALL  -- planning folds constants in the index expressions and predicates of the relations it reads,
               -- and in their check constraints (constraint exclusion)
    SELECT r.relname, 'row', e.tree FROM user_rels r JOIN pg_index i ON r.oid IN (i.indrelid, i.indexrelid)
    CROSS JOIN LATERAL unnest(ARRAY[i.indexprs::text, i.indpred::text]) AS e(tree)
    WHERE %(planned_code)s AND e.tree IS NOT NULL
    UNION ALL
    SELECT r.relname, 'row', c.conbin::text FROM user_rels r JOIN pg_constraint c ON c.conrelid = r.oid
    WHERE %(planned_code)s AND c.contype = 'c' AND c.conbin IS NOT NULL
    UNION ALL  -- and in the partition keys of the relations and of the partitioned tables above them (loading
               -- a key folds its expressions), and in their extended statistics' expressions
    SELECT r.relname, 'row', t.partexprs::text FROM user_rels r
    CROSS JOIN LATERAL pg_partition_ancestors(r.oid) AS a(relid) JOIN pg_partitioned_table t ON t.partrelid = a.relid
    WHERE %(planned_code)s AND t.partexprs IS NOT NULL
    UNION ALL
    SELECT r.relname, 'row', x.stxexprs::text FROM user_rels r JOIN pg_statistic_ext x ON x.stxrelid = r.oid
    WHERE %(planned_code)s AND x.stxexprs IS NOT NULL
),
seed_types(label, bucket, oid) AS (
    SELECT to_regtype(name)::text, 'row', to_regtype(name)::oid FROM unnest(%(types)s::text[]) AS name
    WHERE to_regtype(name) IS NOT NULL
    UNION ALL
    SELECT oid::regtype::text, 'row', oid FROM unnest(%(met_type_oids)s::oid[]) AS oid
    UNION ALL  -- a value converted to a relation's row type (`jsonb_populate_record(t, ...)`, an untyped
               -- literal beside a whole-row value) runs the checks of its columns' domains
    SELECT r.relname, 'row', r.reltype FROM user_rels r WHERE r.reltype <> 0
    UNION ALL  -- a call converts its arguments to its parameters' types, and its result to its result type
    SELECT t.oid::regtype::text, 'row', t.oid FROM pg_proc p
    CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]) || p.prorettype) AS t(oid)
    WHERE p.proname = ANY(%(functions)s::text[]) AND t.oid >= 16384  -- built-in types run no user code
),
seed_functions(label, bucket, proc) AS (SELECT NULL::text, NULL::text, NULL::oid WHERE false),
{REACHED_CODE},
met_seed(oid) AS (
    SELECT oid FROM reached_types
    UNION
    SELECT a.atttypid FROM user_rels r JOIN pg_attribute a ON a.attrelid = r.oid
    WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION
    SELECT reltype FROM user_rels WHERE reltype <> 0  -- whole-row references
    UNION  -- what the named operators produce (`(1 <%%> 2) === x` applies `===` to a `<%%>` result)
    SELECT o.oprresult FROM pg_operator o WHERE o.oprname = ANY(%(operators)s::text[]) AND o.oprresult >= 16384
    UNION  -- an `anyarray` column (pg_stats' sampled values) holds values of any column's type: where the statement
           -- or a view it reads names a relation with one, it meets every user-defined type
    SELECT t.oid FROM pg_type t WHERE t.oid >= 16384 AND EXISTS (
        SELECT 1 FROM pg_attribute a WHERE a.atttypid = 'anyarray'::regtype AND (
            a.attrelid IN (SELECT to_regclass(name) FROM unnest(%(relations)s::text[]) AS name)
            OR a.attrelid IN (SELECT m[1]::oid FROM user_rels r JOIN pg_rewrite w ON w.ev_class = r.oid
                              CROSS JOIN LATERAL regexp_matches(w.ev_action::text, %(relation_oids)s, 'g') AS m)))
),
{MET_TYPES},
operators AS (  -- the operators named, except those of user-defined types the statement does not meet
    SELECT o.* FROM pg_operator o WHERE o.oprname = ANY(%(operators)s::text[])
    AND (o.oprname = ANY(%(open_operators)s::text[])
         OR NOT EXISTS (SELECT 1 FROM unnest(ARRAY[o.oprleft, o.oprright]) AS operand(oid)
                        WHERE operand.oid >= 16384 AND operand.oid NOT IN (SELECT oid FROM met_types))
         OR o.oprname = ANY(%(half_open_operators)s::text[])
            AND EXISTS (SELECT 1 FROM unnest(ARRAY[o.oprleft, o.oprright]) AS operand(oid)
                        WHERE operand.oid < 16384 OR operand.oid IN (SELECT oid FROM met_types)))
)
SELECT n.nspname, p.proname, {_VOLATILITY}, true, false, f.label, false, {EXTENSION_MEMBER}, p.oid
FROM code_functions f JOIN pg_proc p ON p.oid = f.proc JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE f.bucket = 'row'
UNION ALL
SELECT n.nspname, p.proname, {_VOLATILITY}, true, false, f.label, false, {EXTENSION_MEMBER}, p.oid
FROM user_casts f JOIN pg_proc p ON p.oid = f.proc JOIN pg_namespace n ON n.oid = p.pronamespace
UNION ALL
SELECT n.nspname, p.proname, {_VOLATILITY}, n.nspname = ANY(current_schemas(true)),
       p.pronargs >= 1 AND p.pronargs - p.pronargdefaults <= 1, NULL, false, {EXTENSION_MEMBER}, p.oid
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname = ANY(%(functions)s::text[])
UNION ALL
SELECT n.nspname, p.proname, {_VOLATILITY}, true, false, 'the operator family ' || family.opfname, false,
       {EXTENSION_MEMBER}, p.oid
FROM (
    SELECT a.amprocfamily, a.amproc::oid FROM pg_amproc a WHERE a.amproc::oid >= 16384
    UNION
    SELECT m.amopfamily, o.oprcode::oid FROM pg_amop m JOIN pg_operator o ON o.oid = m.amopopr
    WHERE o.oprcode::oid >= 16384
) AS f(family, proc)
JOIN pg_opfamily family ON family.oid = f.family
JOIN pg_proc p ON p.oid = f.proc JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE EXISTS (SELECT 1 FROM pg_opclass c WHERE c.opcfamily = f.family AND c.opcdefault
              AND c.opcintype IN (SELECT oid FROM met_types))
   OR EXISTS (SELECT 1 FROM pg_amop m JOIN operators o ON o.oid = m.amopopr WHERE m.amopfamily = f.family)
   -- a range type's subtype class compares the bounds of every value of it built
   OR EXISTS (SELECT 1 FROM pg_range g JOIN pg_opclass c ON c.oid = g.rngsubopc
              WHERE c.opcfamily = f.family AND g.rngtypid IN (SELECT oid FROM met_types))
   -- a partition key's class sorts the partitions' bounds when a session first plans the table
   OR %(planned_code)s AND EXISTS (
       SELECT 1 FROM user_rels r CROSS JOIN LATERAL pg_partition_ancestors(r.oid) AS a(relid)
       JOIN pg_partitioned_table t ON t.partrelid = a.relid JOIN pg_opclass c ON c.oid = ANY(t.partclass::oid[])
       WHERE c.opcfamily = f.family)
UNION ALL
SELECT n.nspname, p.proname, {_VOLATILITY}, true, false, r.relname, false, {EXTENSION_MEMBER}, p.oid
FROM user_rels r JOIN pg_foreign_table t ON t.ftrelid = r.oid JOIN pg_foreign_server s ON s.oid = t.ftserver
JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw JOIN pg_proc p ON p.oid = w.fdwhandler
JOIN pg_namespace n ON n.oid = p.pronamespace
UNION ALL
SELECT n.nspname, o.oprname, {_OPERATOR_VOLATILITY}, n.nspname = ANY(current_schemas(true)), false, NULL, true,
       {EXTENSION_MEMBER}, p.oid
FROM operators o JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace n ON n.oid = p.pronamespace
UNION ALL  -- a user-defined operator's negator and commutator, which the planner may apply instead
SELECT n.nspname, o.oprname, {_OPERATOR_VOLATILITY}, n.nspname = ANY(current_schemas(true)), false, NULL, true,
       {EXTENSION_MEMBER}, p.oid
FROM operators o CROSS JOIN LATERAL (VALUES (o.oprnegate), (o.oprcom)) AS related(oid)
JOIN pg_operator r ON r.oid = related.oid JOIN pg_proc p ON p.oid = r.oprcode
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE o.oid >= 16384
"""

# The functions `oids` with what judging their bodies takes: the definition of an SQL or PL/pgSQL one, its
# rights and owner, the settings it makes for itself (search path, string syntax), an aggregate's support
# functions, its user-defined parameter and result types, and whether a parameter is polymorphic.
_DEFINITIONS_SQL = f"""
SELECT n.nspname, p.proname, {_VOLATILITY}, {EXTENSION_MEMBER}, p.oid, l.lanname::text, p.prosecdef, p.proowner,
       CASE WHEN p.prokind <> 'a' AND l.lanname IN ('sql', 'plpgsql') THEN pg_get_functiondef(p.oid)
            WHEN l.lanname = 'internal' THEN p.prosrc END,
       (SELECT substr(setting, length('search_path=') + 1) FROM unnest(p.proconfig) AS setting
        WHERE setting LIKE 'search\\_path=%%'),
       (SELECT substr(setting, length('standard_conforming_strings=') + 1) FROM unnest(p.proconfig) AS setting
        WHERE setting LIKE 'standard\\_conforming\\_strings=%%'),
       ARRAY(SELECT support FROM pg_aggregate a CROSS JOIN LATERAL unnest(ARRAY[{_AGGREGATE_SUPPORT}]::oid[]) AS support
             WHERE a.aggfnoid = p.oid AND support <> 0),
       ARRAY(SELECT t FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]) || p.prorettype) AS t
             WHERE t >= 16384),
       EXISTS (SELECT 1 FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) AS a JOIN pg_type t ON t.oid = a
               WHERE t.typtype = 'p' AND (t.typname LIKE 'any%%' OR t.typname = 'record'))
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
WHERE p.oid = ANY(%(oids)s::oid[])
"""


@dataclass(frozen=True)
class FunctionDefinition:
    function: CatalogFunction
    language: str
    definition: str | None
    """`CREATE FUNCTION` for an SQL or PL/pgSQL function, the name of the built-in C function an `internal` one
    runs; None for an aggregate or another language."""
    security_definer: bool
    """It runs with its owner's rights (`SECURITY DEFINER`)."""
    owner: int
    """Its owner's role."""
    search_path: str | None
    """The search path the function sets for itself (`SET search_path`), which its body's names resolve in."""
    string_syntax: str | None
    """The `standard_conforming_strings` the function sets for itself, which its body's strings are read with."""
    support: tuple[int, ...]
    """An aggregate's support functions."""
    types: tuple[int, ...]
    """Its parameters' and result's user-defined types, which its body meets (built-in ones run no user code)."""
    polymorphic: bool
    """A parameter takes the type of the caller's argument (`anyelement`, `anycompatible`..., `record`)."""


def fingerprint(text: str) -> str:
    """SQL for the fingerprint of a definition, `text` (an SQL expression): 64 bits of its MD5, in hexadecimal, so
    that no one can make other code with the fingerprint a question shows."""
    return f"left(md5({text}), 16)"


# A fingerprint of a function's or procedure's definition, for those created in the database (not PostgreSQL's own;
# an aggregate has no definition to show): one replaced runs other code under the same name.
DEFINITION_FINGERPRINT = (
    f"CASE WHEN p.oid >= 16384 AND p.prokind IN ('f', 'p') THEN {fingerprint('pg_get_functiondef(p.oid)')} END"
)
_FINGERPRINTS_SQL = f"SELECT p.oid, {DEFINITION_FINGERPRINT} FROM pg_proc p WHERE p.oid = ANY (%(oids)s::oid[])"


# A version of every function and procedure created in the database (not PostgreSQL's own): each row's own version
# (`xmin`, new whenever the row is written) changes when one is replaced or altered, and the list when one is created
# or dropped.
_CODE_ROWS = "coalesce(string_agg(p.oid::text || '.' || p.xmin::text, ',' ORDER BY p.oid), '')"
_CODE_VERSION_SQL = f"SELECT {fingerprint(_CODE_ROWS)} FROM pg_proc p WHERE p.oid >= 16384"


async def code_version(connection: Connection) -> str:
    """A version of the functions and procedures created in the database (`Classification.code_version`)."""
    cursor = await connection.execute(_CODE_VERSION_SQL)
    row = await cursor.fetchone()
    return str(row[0]) if row is not None else ""


async def definition_fingerprints(connection: Connection, oids: Sequence[int]) -> dict[int, str]:
    """`DEFINITION_FINGERPRINT` of each of the functions `oids` that has one, inside the caller's transaction."""
    if not oids:
        return {}
    cursor = await connection.execute(_FINGERPRINTS_SQL, {"oids": [Oid(oid) for oid in oids]})
    return {int(oid): str(fingerprint) for oid, fingerprint in await cursor.fetchall() if fingerprint is not None}


async def function_definitions(connection: Connection, oids: Sequence[int]) -> list[FunctionDefinition]:
    """The functions `oids` (those that still exist), inside the caller's transaction."""
    cursor = await connection.execute(_DEFINITIONS_SQL, {"oids": list(oids)})
    return [
        FunctionDefinition(
            CatalogFunction(schema, name, volatility, True, False, extension=bool(extension), oid=oid),
            language,
            definition,
            security_definer,
            owner,
            search_path,
            string_syntax,
            tuple(support),
            tuple(types),
            polymorphic,
        )
        for (
            schema,
            name,
            volatility,
            extension,
            oid,
            language,
            security_definer,
            owner,
            definition,
            search_path,
            string_syntax,
            support,
            types,
            polymorphic,
        ) in await cursor.fetchall()
    ]


# Whether each schema name of a search path resolves alike for the reader and the role `owner`: the implicit
# ones; a schema that does not exist; one both or neither may use; `$user` when no schema bears either name.
_RESOLVES_ALIKE_SQL = """
SELECT coalesce(bool_and(CASE
    WHEN name IN ('pg_catalog', 'pg_temp') THEN true
    WHEN name = '$user' THEN current_user = (SELECT rolname FROM pg_roles WHERE oid = %(owner)s)
        OR NOT EXISTS (SELECT 1 FROM pg_namespace n JOIN pg_roles r ON r.rolname = n.nspname
                       WHERE r.rolname = current_user OR r.oid = %(owner)s)
    WHEN NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = name) THEN true
    ELSE has_schema_privilege(name, 'USAGE') = has_schema_privilege(%(owner)s::oid, name, 'USAGE')
END), true) FROM unnest(%(names)s::text[]) AS name
"""


async def resolves_alike(connection: Connection, names: Sequence[str], owner: int) -> bool:
    """Whether relation and type names resolve alike for the reader and for `owner` in the search path of
    schemas `names` (see `_RESOLVES_ALIKE_SQL`)."""
    cursor = await connection.execute(_RESOLVES_ALIKE_SQL, {"names": list(names), "owner": owner})
    row = await cursor.fetchone()
    return bool(row and row[0])


# Types that run code when a value is converted to them or compared: domains (checks, defaults), the
# types of user-defined casts, and the operands of user-defined operators.
_CONVERTING_TYPES_SQL = """
SELECT t.oid FROM pg_type t WHERE t.typtype = 'd' AND t.oid >= 16384
UNION
SELECT unnest(ARRAY[c.castsource, c.casttarget]) FROM pg_cast c WHERE c.castfunc >= 16384
UNION
SELECT operand FROM pg_operator o CROSS JOIN LATERAL unnest(ARRAY[o.oprleft, o.oprright]) AS operand
WHERE o.oprcode >= 16384 AND operand >= 16384
"""


async def converting_types(connection: Connection) -> list[int]:
    """Every user-defined domain, every type of a user-defined cast, every user-defined operand of a
    user-defined operator (see `_CONVERTING_TYPES_SQL`)."""
    cursor = await connection.execute(_CONVERTING_TYPES_SQL)
    return [oid for (oid,) in await cursor.fetchall()]


def _all(items: Iterable[str]) -> list[str]:
    """`items` once each, in order."""
    return list(dict.fromkeys(items))


# Each name (quoted, as a statement writes it) and the relation it finds now, schema-qualified and quoted.
# The relation's OID too: another relation renamed to the name (or dropped and made again) is another relation.
_RESOLVED_SQL = """
SELECT name, (SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) || ' (oid ' || c.oid || ')'
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(name))
FROM unnest(%(names)s::text[]) WITH ORDINALITY AS names(name, position) ORDER BY position
"""


async def resolved(connection: Connection, names: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    """Each of `names` and the relation it means in this session (its search path): `schema.name (oid N)`, or None."""
    if not names:
        return ()
    cursor = await connection.execute(_RESOLVED_SQL, {"names": list(names)})
    return tuple((str(name), None if meant is None else str(meant)) for name, meant in await cursor.fetchall())


_EVERY_RELATION_SQL = """
SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'
"""


async def every_relation(connection: Connection) -> list[str]:
    """Every table and materialized view outside the system schemas, as quoted names (for a statement that
    maintains them all)."""
    cursor = await connection.execute(_EVERY_RELATION_SQL)
    return [str(name) for (name,) in await cursor.fetchall()]


CATALOG_SETTINGS = {
    "jit": "off",
    "work_mem": "2MB",
    "hash_mem_multiplier": "1",
    "enable_hashjoin": "off",
    "enable_mergejoin": "off",
}
"""The catalog queries' settings. The planner's estimates for their recursive queries are absurd (billions of rows
where there are a few), and it plans for them. No JIT: it would compile the queries for a second or more, for
queries that take milliseconds. A small work_mem: the hash table of each recursive query's UNION is sized for the
estimate, up to work_mem times hash_mem_multiplier, and zeroing those at the defaults took 10 ms of each function
query. Nested loops only: a hash join built on such an estimate split into 131,072 batches in temporary files, 20
ms, and failed where the server forbids temporary files (`temp_file_limit = 0`); the catalogs' indexes serve
nested loops well."""
_PER_SESSION_SETTINGS = [*CATALOG_SETTINGS, "plan_cache_mode"]


async def for_catalog_queries(connection: Connection) -> None:
    """`CATALOG_SETTINGS` for the rest of the transaction; and on a reader, generic plans, so that `function_facts`,
    prepared in the reader's session, is planned once per session (not again for each set of parameters)."""
    settings = dict(CATALOG_SETTINGS)
    if connection.read_only:
        settings["plan_cache_mode"] = "force_generic_plan"
    await connection.execute(
        "SELECT set_config(name, value, true) FROM unnest(%s::text[], %s::text[]) AS settings(name, value)",
        (list(settings), list(settings.values())),
    )


async def with_session_settings(connection: Connection) -> None:
    """Back to the session's own settings from `for_catalog_queries`, until the transaction or savepoint ends: for
    a statement of the user's (an approved change, a count of a table), which may need JIT, memory or hash joins."""
    await connection.execute(
        "SELECT set_config(name, reset_val, true) FROM pg_settings WHERE name = ANY(%s)", (_PER_SESSION_SETTINGS,)
    )


# Parsing and planning the function query take PostgreSQL 10 ms or more each time, running its prepared generic
# plan (`for_catalog_queries`) about 2 ms.
_FUNCTIONS = ReaderStatement("safedb_function_facts", _FUNCTIONS_SQL)


async def function_facts(
    connection: Connection,
    statements: Sequence[PostgresStatement],
    type_oids: Sequence[int] = (),
    planned_code: bool = True,
    relations: Sequence[str] = (),
) -> list[CatalogFunction]:
    """What `statements` may run, by one catalog query inside the caller's (read-only) transaction, which has
    called `for_catalog_queries`. The types met are the statements' (by name) and `type_oids`; their operators applied
    to untyped literals only count whatever types they take, and those applied to an untyped literal and a
    typed value where either operand's type is met or built in. With `planned_code`, also what the relations'
    index expressions and predicates and check constraints call, which planning folds (a statement that asks
    anyway leaves it to its impact preview, which names it per table). `relations`: more relations (quoted names)
    than the statements name."""
    rows = await _FUNCTIONS.rows(
        connection,
        {
            "functions": _all(ref.name for statement in statements for ref in statement.functions),
            "operators": _all(name for statement in statements for name in statement.operators),
            "relations": _all(
                [*relations, *(relation.quoted() for statement in statements for relation in statement.relations)]
            ),
            "types": _all(name for statement in statements for name in statement.types),
            "met_type_oids": [Oid(oid) for oid in type_oids],  # as oid[], not the smallest integer type
            "open_operators": _all(name for statement in statements for name in statement.open_operators),
            "half_open_operators": _all(name for statement in statements for name in statement.half_open_operators),
            "planned_code": planned_code,
            "write_rules": any(statement.plans_write_rules for statement in statements),
            "view_queries": all(statement.view_queries for statement in statements),
            **PATTERNS,
        },
    )
    return [
        CatalogFunction(
            schema, name, volatility, bool(on_path), bool(one_arg), via, bool(operator), bool(extension), oid
        )
        for schema, name, volatility, on_path, one_arg, via, operator, extension, oid in rows
    ]


_RELKINDS = {"r": "table", "p": "partitioned table", "v": "view", "m": "materialized view", "f": "foreign table"}

_TABLES_SQL = """
SELECT n.nspname, c.relname, c.relkind::text, pg_table_is_visible(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'
  AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND NOT c.relispartition
ORDER BY 4 DESC, 1, 2
"""


@dataclass(frozen=True)
class Relation:
    schema: str
    name: str
    kind: str
    visible: bool

    @property
    def display_name(self) -> str:
        """The bare name when the search path finds it, else `schema.name`."""
        return self.name if self.visible else f"{self.schema}.{self.name}"

    @property
    def type(self) -> str:
        return _RELKINDS.get(self.kind, "table")

    def identifier(self) -> sql.Composed:
        return quoted(self.schema, self.name)


async def relations(connection: Connection) -> list[Relation]:
    cursor = await connection.execute(_TABLES_SQL)
    return [Relation(schema, name, kind, bool(visible)) for schema, name, kind, visible in await cursor.fetchall()]


_COLUMNS_SQL = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND a.attnum = ANY(i.indkey))
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %(relation)s::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_VIEW_SQL = "SELECT pg_get_viewdef(%(relation)s::regclass, true)"


async def columns(connection: Connection, relation: Relation) -> tuple[ColumnInfo, ...]:
    name = relation.identifier().as_string(connection)
    cursor = await connection.execute(_COLUMNS_SQL, {"relation": name})
    return tuple(
        ColumnInfo(name=column, type=kind, nullable=bool(nullable), default=default, primary_key=bool(primary))
        for column, kind, nullable, default, primary in await cursor.fetchall()
    )


async def definition(connection: Connection, relation: Relation) -> str | None:
    """`CREATE VIEW ... AS ...` for views and materialized views; None for tables."""
    if relation.kind not in ("v", "m"):
        return None
    cursor = await connection.execute(_VIEW_SQL, {"relation": relation.identifier().as_string(connection)})
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        return None
    keyword = "VIEW" if relation.kind == "v" else "MATERIALIZED VIEW"
    return f"CREATE {keyword} {relation.identifier().as_string(connection)} AS\n{str(row[0]).strip()}"


async def row_count(connection: Connection, relation: Relation, seconds: float) -> int | None:
    """count(*) within `seconds`, in a savepoint: None when it takes longer (or for a view)."""
    if relation.kind not in ("r", "p", "m"):
        return None
    query = sql.SQL("SELECT count(*) FROM {}").format(relation.identifier())
    try:
        # Rolled back to, which also restores the transaction's own time limits.
        async with connection.transaction(force_rollback=True):
            await set_statement_timeout(connection, seconds)
            await with_session_settings(connection)
            cursor = await connection.execute(query)
            row = await cursor.fetchone()
    except (QueryCanceled, LockNotAvailable):  # over time, or waiting for a lock
        return None
    return int(row[0]) if row else None


# The rows the planner takes a relation to hold (`reltuples`, -1 before its first VACUUM or ANALYZE): for a
# partitioned table, its partitions'. None when not one of them was ever measured.
_ROW_ESTIMATE_SQL = """
SELECT sum(c.reltuples) FILTER (WHERE c.reltuples >= 0)::bigint FROM pg_class c
WHERE c.relkind IN ('r', 'm') AND (c.oid = %(relation)s::regclass
      OR c.oid IN (SELECT t.relid FROM pg_partition_tree(%(relation)s::regclass) AS t))
"""


async def row_estimate(connection: Connection, relation: Relation) -> int | None:
    """The planner's estimate of the relation's rows, read from the catalog (nothing of the table runs)."""
    if relation.kind not in ("r", "p", "m"):
        return None
    cursor = await connection.execute(_ROW_ESTIMATE_SQL, {"relation": relation.identifier().as_string(connection)})
    row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])
