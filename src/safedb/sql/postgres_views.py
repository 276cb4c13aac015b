"""The relation an automatically updatable PostgreSQL view changes in its place. Pure: no connection.

PostgreSQL changes such a view by changing the one relation its query reads FROM (a table, or another view, in
turn). The catalog stores the query as a node tree, whose text form differs between versions; `pg_get_viewdef`
gives it as SQL, which PostgreSQL's own parser reads here.
"""

from __future__ import annotations

from pglast import ast
from pglast.enums import SetOperation
from pglast.parser import ParseError

from safedb.sql.postgres_classifier import parse_statements
from safedb.sql.postgres_tree import QualifiedName


def view_source(query: str) -> QualifiedName | None:
    """The one relation the view query `query` (`pg_get_viewdef`'s text) reads FROM, as its text names it (qualified
    where the session's search path would not find it); None when it reads from anything else (a join, a subquery,
    a set operation, nothing), which PostgreSQL cannot change in the view's place."""
    try:
        statements = parse_statements(query)
    except (ParseError, ValueError):
        return None
    if len(statements) != 1 or not isinstance(select := statements[0].stmt, ast.SelectStmt):
        return None
    if select.op != SetOperation.SETOP_NONE or len(select.fromClause or ()) != 1:
        return None
    (source,) = select.fromClause or ()
    return QualifiedName.from_range_var(source) if isinstance(source, ast.RangeVar) else None
