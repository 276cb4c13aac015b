"""Whether counting a relation's rows is a read SafeDB would run without asking.

`SELECT count(*) FROM t` is not inert: planning it folds the table's partition keys, extended statistics'
expressions, index expressions and check constraints, and scanning it runs its row-security policies (for
a role they apply to, such as the reader). The impact preview of a `TRUNCATE`, `DROP`, `LOCK`... (made
before anyone answers) and `describe_table` (which never asks) count rows, so the count is judged as a read
of that statement would be; where it is not one, they do without the exact count.
"""

from __future__ import annotations

from safedb.db.postgres import catalog, function_bodies
from safedb.db.postgres.connections import Connection
from safedb.errors import DeniedByPolicy
from safedb.sql.postgres_classifier import analyze_statement
from safedb.sql.postgres_functions import function_changes


async def count_is_a_read(connection: Connection, relation: str) -> bool:
    """True when `SELECT count(*) FROM relation` (a quoted name) would be classified a read. Runs inside the
    caller's read-only transaction, which has called `catalog.for_catalog_queries`."""
    statement = analyze_statement(f"SELECT count(*) FROM {relation}")
    facts = await catalog.function_facts(connection, [statement], planned_code=True)
    facts = await function_bodies.judged(connection, facts)
    try:
        changes = function_changes(statement.functions, facts)
    except DeniedByPolicy:  # a policy reads a server file
        return False
    return not statement.with_changes(changes).changes
