"""The functions PostgreSQL runs of its own accord: those in constraints, defaults, generated columns,
index expressions and row-security policies, and in the checks and defaults of every domain involved, at
any depth (a domain over a domain, an array or a row of one, a range over one).

They are read from the expressions the catalog stores (`pg_node_tree`), which name each function they call
by its OID, built-ins included (`pg_depend` leaves built-ins out), and each type they produce: a cast to a
domain brings that domain's checks along.
"""

from __future__ import annotations

# Parameters of `REACHED_CODE`: in a stored expression's text, the OIDs of the functions it calls, of the
# operators it applies (each is judged by its function), and of the types it produces or reads; and of
# the relations a stored query reads (a view's, a policy's subquery).
PATTERNS = {
    "function_oids": r":(?:funcid|opfuncid|aggfnoid|winfnoid|hashfuncid|negfuncid) (\d+)",
    "operator_oids": r":opno (\d+)",
    "type_oids": r":[a-z_]*type[a-z_]* (\d+)",
    "relation_oids": r":relid (\d+)",
}

# Whether the function `p` (a `pg_proc` row) was installed by an extension: a member of one, owned by a
# superuser (an extension's owner may add functions of its own to it, which stay theirs).
EXTENSION_MEMBER = """(EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid
    AND e.refclassid = 'pg_extension'::regclass AND e.deptype = 'e')
    AND EXISTS (SELECT 1 FROM pg_roles o WHERE o.oid = p.proowner AND o.rolsuper))"""

# The types directly inside the type `t` (a `pg_type` row): a domain's base, an array's element, a row's
# fields, a range's subtype.
_TYPES_INSIDE = """        SELECT t.typbasetype WHERE t.typbasetype <> 0
        UNION ALL
        SELECT t.typelem WHERE t.typelem <> 0
        UNION ALL
        SELECT a.atttypid FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT g.rngsubtype FROM pg_range g WHERE g.rngtypid = t.oid"""

# The recursive steps below look each type they reach up by its OID, in a subquery that `OFFSET 0` keeps apart: when
# the type was joined instead, PostgreSQL planned for the huge row counts it guesses for a recursive query, and
# read every type in the catalog with what is inside each, on every round (spilling to temporary files, which a
# `temp_file_limit` may forbid), where a round reaches a few types.

# Common table expressions for a `WITH RECURSIVE` query that defines the seeds first:
#   seed_trees(label text, bucket text, tree text)   stored expressions (as text) that run;
#   seed_types(label text, bucket text, oid oid)     types whose values are written or produced;
#   seed_functions(label text, bucket text, proc oid) functions known to run.
# They define code_functions(label, bucket, proc): every function reached, under its seed's label and
# bucket, except that a domain's default goes to the bucket 'default' (it runs only where a default does).
REACHED_CODE = f"""
reached_types(label, bucket, oid) AS (
    SELECT label, bucket, oid FROM seed_types
    UNION
    SELECT s.label, s.bucket, m[1]::oid FROM seed_trees s
        CROSS JOIN LATERAL regexp_matches(s.tree, %(type_oids)s, 'g') AS m
    UNION
    SELECT r.label, r.bucket, next.oid FROM reached_types r
    CROSS JOIN LATERAL (SELECT * FROM pg_type WHERE oid = r.oid OFFSET 0) AS t
    CROSS JOIN LATERAL (
{_TYPES_INSIDE}
        UNION ALL
        SELECT g.rngtypid FROM pg_range g WHERE g.rngmultitypid = t.oid
        UNION ALL
        SELECT m[1]::oid FROM pg_constraint c CROSS JOIN LATERAL regexp_matches(c.conbin::text, %(type_oids)s, 'g') AS m
        WHERE c.contypid = t.oid
        UNION ALL
        SELECT m[1]::oid FROM regexp_matches(coalesce(t.typdefaultbin::text, ''), %(type_oids)s, 'g') AS m
    ) AS next(oid)
),
code_trees(label, bucket, tree) AS (
    SELECT label, bucket, tree FROM seed_trees
    UNION ALL
    SELECT r.label, r.bucket, c.conbin::text FROM reached_types r JOIN pg_constraint c ON c.contypid = r.oid
    WHERE c.conbin IS NOT NULL
    UNION ALL
    SELECT r.label, 'default', t.typdefaultbin::text FROM reached_types r JOIN pg_type t ON t.oid = r.oid
    WHERE t.typdefaultbin IS NOT NULL
),
code_functions(label, bucket, proc) AS (
    SELECT label, bucket, proc FROM seed_functions
    UNION ALL
    SELECT c.label, c.bucket, m[1]::oid FROM code_trees c
        CROSS JOIN LATERAL regexp_matches(c.tree, %(function_oids)s, 'g') AS m
    UNION ALL
    SELECT c.label, c.bucket, o.oprcode::oid FROM code_trees c
        CROSS JOIN LATERAL regexp_matches(c.tree, %(operator_oids)s, 'g') AS m
        JOIN pg_operator o ON o.oid = m[1]::oid
    UNION ALL
    SELECT r.label, r.bucket, f.proc FROM reached_types r JOIN pg_range g ON g.rngtypid = r.oid
        CROSS JOIN LATERAL unnest(ARRAY[g.rngcanonical::oid, g.rngsubdiff::oid]) AS f(proc)
    WHERE f.proc <> 0
)"""


# Common table expressions for a `WITH RECURSIVE` query that defines met_seed(oid) first: the types whose
# values the statement may handle. They define met_types(oid), those types and every type inside them (a
# domain's base, an array's element, a row's fields, a range's subtype), and user_casts(label, proc): the
# user-defined casts from or to a user-defined type among them, which PostgreSQL applies unasked as
# assignment and implicit casts (also in a foreign key's checks). A cast or an operator of a user-defined
# type (OID past the built-ins, 16384) matters only where such values are.
MET_TYPES = f"""
met_types(oid) AS (
    SELECT oid FROM met_seed
    UNION
    SELECT next.oid FROM met_types m CROSS JOIN LATERAL (SELECT * FROM pg_type WHERE oid = m.oid OFFSET 0) AS t
    CROSS JOIN LATERAL (
{_TYPES_INSIDE}
    ) AS next(oid)
),
user_casts(label, proc) AS (
    SELECT 'the cast from ' || format_type(c.castsource, NULL) || ' to ' || format_type(c.casttarget, NULL),
           c.castfunc
    FROM pg_cast c WHERE c.castfunc >= 16384
      AND ((c.castsource >= 16384 AND c.castsource IN (SELECT oid FROM met_types))
           OR (c.casttarget >= 16384 AND c.casttarget IN (SELECT oid FROM met_types)))
)"""
