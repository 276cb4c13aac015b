"""The rows a transaction has changed in each table, as PostgreSQL's statistics count them: what a counted dry run
shows, and what its approved run must change again (`Impact.row_changes`).

The statement's own count is not enough to hold an approval to. A statement can tell its dry run from its run (a
setting, a lock it holds, the time it takes, read directly or through a view or a CHECK made earlier), and make up
the count elsewhere: delete another child table's rows through their parent, other rows that a foreign key cascades
from, or delete where the dry run updated. PostgreSQL counts, per table and transaction, the rows inserted, updated
and deleted, cascades and partitions included, rolled-back savepoints too (`pg_stat_xact_user_tables`).
"""

from __future__ import annotations

from safedb import wording
from safedb.db.postgres.connections import Connection
from safedb.errors import ChangedSinceQuestion

_ROWS_CHANGED = """
SELECT pg_catalog.format('%I.%I', s.schemaname, s.relname), s.n_tup_ins, s.n_tup_upd, s.n_tup_del
FROM pg_catalog.pg_stat_xact_user_tables AS s
WHERE s.n_tup_ins > 0 OR s.n_tup_upd > 0 OR s.n_tup_del > 0
"""

RowCounts = dict[str, tuple[int, int, int]]
_VERBS = ("inserted", "updated", "deleted")


async def row_counts(connection: Connection) -> RowCounts:
    """The rows inserted, updated and deleted in each table, as PostgreSQL counts them for the transaction. Its counts
    also hold what earlier transactions of the same session did, until the session reports them (when idle, at most
    once a second): only the difference between two readings in one transaction says what happened between them."""
    cursor = await connection.execute(_ROWS_CHANGED)
    return {table: (inserted, updated, deleted) for table, inserted, updated, deleted in await cursor.fetchall()}


def rows_changed_by_table(before: RowCounts, after: RowCounts) -> tuple[str, ...]:
    """One line per table that rows were changed in between the two readings (`public.orders: 1,000 rows deleted`),
    in order of their names."""
    lines = []
    for table in sorted(after):
        counts = [n - was for n, was in zip(after[table], before.get(table, (0, 0, 0)), strict=True)]
        if any(counts):
            changed = (f"{wording.rows(n)} {verb}" for n, verb in zip(counts, _VERBS, strict=True) if n)
            lines.append(f"{table}: " + ", ".join(changed))
    return tuple(lines)


def row_changes_line(changes: tuple[str, ...]) -> str:
    """The question's line: what the dry run changed in each table, which an approval holds for."""
    listed = "; ".join(changes) if changes else "no rows"
    return f"the dry run changed, by table: {listed}. An approval holds for exactly these changes too."


async def check_row_changes(connection: Connection, before: RowCounts, approved: tuple[str, ...]) -> None:
    """Raise ChangedSinceQuestion (the caller rolls back) unless the statement changed, table by table, the rows its
    dry run did (`row_changes`), counted since `before`."""
    now = rows_changed_by_table(before, await row_counts(connection))
    if now != approved:
        raise ChangedSinceQuestion(
            f"it changed other rows than its dry run: {'; '.join(now) or 'none'}, where the question showed "
            f"{'; '.join(approved) or 'none'}"
        )
