"""Whether SafeDB's catalog queries still call PostgreSQL's own functions and operators.

Those queries name functions and operators without a schema, so PostgreSQL looks them up in the session's
search path. pg_catalog comes first there, but a candidate whose argument types match exactly wins over one that
needs a conversion: a `public.unnest(text[])` takes the place of `pg_catalog.unnest(anyarray)` in every query
that unnests a text array, and could then hide a trigger from a question, or let a dry run fire it. Before its
catalog queries, SafeDB looks for such a function or operator outside the system catalogs and extensions, and
refuses to go on while there is one (`begin_catalog_work`).

The check itself names every function, operator and type with its schema, so nothing can take its place.
"""

from __future__ import annotations

from safedb.db.postgres.connections import Connection, milliseconds
from safedb.db.postgres.prepared import ReaderStatement
from safedb.errors import QueryFailed

CATALOG_FUNCTIONS = frozenset({
    "array_to_string", "bool_and", "bool_or", "count", "current_schemas", "current_setting", "format_type",
    "has_schema_privilege", "has_table_privilege", "left", "length", "md5", "pg_advisory_unlock_all",
    "pg_database_size", "pg_get_expr", "pg_get_functiondef", "pg_get_ruledef", "pg_get_triggerdef", "pg_get_viewdef",
    "pg_has_role", "pg_partition_ancestors", "pg_partition_tree", "pg_relation_is_updatable", "pg_table_is_visible",
    "pg_total_relation_size", "quote_ident", "regexp_matches", "set_config", "string_agg", "substr", "sum",
    "to_regclass", "to_regtype", "unnest",
})  # fmt: skip
"""The functions SafeDB's catalog queries call by name (tests/postgres/test_postgres_shadowing.py keeps the list
whole)."""

CATALOG_OPERATORS = frozenset({"=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "&", "||", "~~", "!~~"})
"""The operators they apply (`LIKE` is `~~`, `IN` and `IS DISTINCT FROM` are `=`)."""


def _names(names: frozenset[str]) -> str:
    """`names` as a constant of type `pg_catalog.name[]`."""
    elements = ",".join(f'"{name}"' for name in sorted(names))  # none holds a quote or a backslash
    return f"'{{{elements}}}'::pg_catalog.name[]"


# Built-in objects have oids below FirstNormalObjectId. A candidate can take a built-in's place in a query that
# passes built-in types only when each of its argument types is built in, or one a built-in type converts to
# unasked (a user-defined implicit cast); an extension's objects are the extension's.
_USER_OBJECT = "OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid"
_BUILT_IN = "OPERATOR(pg_catalog.<) 16384::pg_catalog.oid"
_FROM_BUILT_IN = f"""({{type}} {_BUILT_IN} OR EXISTS (
    SELECT FROM pg_catalog.pg_cast c WHERE c.casttarget OPERATOR(pg_catalog.=) {{type}} AND c.castsource {_BUILT_IN}
      AND c.castcontext OPERATOR(pg_catalog.=) 'i'))"""
_NOT_AN_EXTENSION_MEMBER = """NOT EXISTS (
    SELECT FROM pg_catalog.pg_depend d
    WHERE d.classid OPERATOR(pg_catalog.=) '{catalog}'::pg_catalog.regclass AND d.objid OPERATOR(pg_catalog.=) {oid}
      AND d.deptype OPERATOR(pg_catalog.=) 'e')"""
_SHADOWING_SQL = f"""
SELECT 'function ' OPERATOR(pg_catalog.||) p.oid::pg_catalog.regprocedure::pg_catalog.text
FROM pg_catalog.pg_proc p
WHERE p.proname OPERATOR(pg_catalog.=) ANY ({_names(CATALOG_FUNCTIONS)}) AND p.oid {_USER_OBJECT}
  AND NOT EXISTS (SELECT FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) AS a(type)
                  WHERE NOT {_FROM_BUILT_IN.format(type="a.type")})
  AND {_NOT_AN_EXTENSION_MEMBER.format(catalog="pg_catalog.pg_proc", oid="p.oid")}
UNION ALL
SELECT 'operator ' OPERATOR(pg_catalog.||) o.oid::pg_catalog.regoperator::pg_catalog.text
FROM pg_catalog.pg_operator o
WHERE o.oprname OPERATOR(pg_catalog.=) ANY ({_names(CATALOG_OPERATORS)}) AND o.oid {_USER_OBJECT}
  AND {_FROM_BUILT_IN.format(type="o.oprleft")} AND {_FROM_BUILT_IN.format(type="o.oprright")}
  AND {_NOT_AN_EXTENSION_MEMBER.format(catalog="pg_catalog.pg_operator", oid="o.oid")}
"""
# Both pools search the schemas the reader could use when they opened (`connections._reader_search_path`), as the
# session's search_path spells them. A role skips a schema there it may no longer use (USAGE revoked meanwhile, by
# an approved REVOKE too), where the other still searches it: a name would then mean one table to the checks made
# as the reader and another to the dry run and the approved statement made as the writer. The schemas on the path
# that exist and that this session's role may not use; a name matched as one element of the list.
_UNUSABLE_SEARCHED_SQL = """
SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_namespace n
WHERE pg_catalog.strpos(
        ', '::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.current_setting('search_path')
          OPERATOR(pg_catalog.||) ', '::pg_catalog.text,
        ', '::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname::pg_catalog.text)
          OPERATOR(pg_catalog.||) ', '::pg_catalog.text) OPERATOR(pg_catalog.>) 0
  AND NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE')
"""
_BEGIN = ReaderStatement(
    "safedb_begin_catalog_work",
    f"""
SELECT pg_catalog.set_config('statement_timeout', %(limit)s, %(local)s),
       pg_catalog.set_config('lock_timeout', %(limit)s, %(local)s),
       ARRAY({_SHADOWING_SQL}),
       ARRAY({_UNUSABLE_SEARCHED_SQL})
""",
)


async def begin_catalog_work(connection: Connection, seconds: float, *, local: bool = True) -> None:
    """The time limits of `set_statement_timeout`, and the check that no function or operator can
    take the place of PostgreSQL's own in SafeDB's catalog queries, in one round trip: call it first in every
    transaction (or, with local=False, session) that runs them. QueryFailed when one can, and when the session's
    role may not use a schema its search path names (`_UNUSABLE_SEARCHED_SQL`)."""
    ((_, _, found, unusable),) = await _BEGIN.rows(connection, {"limit": milliseconds(seconds), "local": local})
    if unusable:
        raise QueryFailed(
            f"SafeDB cannot check statements on this database: the role {connection.info.user} may no longer use "
            f"schema {', '.join(sorted(unusable))}, which SafeDB's search path names, so a name could mean one "
            "table to the checks and another to the statement. Nothing was run. Grant USAGE on it to both SafeDB "
            "roles again, or restart SafeDB (it fixes its search path when it connects)."
        )
    if found:
        raise QueryFailed(
            "SafeDB cannot check statements on this database: the catalog queries its checks rely on could call "
            f"these instead of PostgreSQL's own, and be misled: {'; '.join(sorted(found))}. Nothing was run. "
            'Drop or rename them (docs/postgres.md, section "What SafeDB\'s checks rely on").'
        )
