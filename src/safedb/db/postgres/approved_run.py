"""What an approved statement's run checks, before it (and, for a data change, again before it commits): the
database still is what its question showed.

A person may take minutes to answer, and meanwhile others change the database. The approval covers the tables
the question was about, and, when it showed a dry run's count, a change that runs no code but what that preview
judged. Either may no longer hold: a table of the same name created in a schema the search path reaches first
takes the name over; a trigger, rule, policy or default added to a table runs code nobody saw; a view redefined
makes a change through it land in another table, or calls a function nobody saw; a function redefined writes.
Every approval covers the triggers, rules and event triggers its question named (`Classification.runs`), the
relations beneath the views it changes (`Classification.through_views`), the other tables it reaches (through
foreign keys, or as children and partitions: `Classification.cascades`), the calls with effects it showed, and the
code the tables' defaults, constraints and indexes call (`Classification.stored_code`), and no others.
"""

from __future__ import annotations

from safedb.db.postgres import catalog, function_bodies, views
from safedb.db.postgres.connections import Connection
from safedb.db.postgres.fired_code import check_fired_unchanged, lock_changed_tables, lock_read_relations
from safedb.db.postgres.impact import DATA_KINDS, cascade_lines, changed_since_dry_run, stored_code_calls
from safedb.errors import ChangedSinceQuestion
from safedb.sql.classification import Classification, names_moved
from safedb.sql.postgres_classifier import PostgresStatement


async def check_unchanged(
    connection: Connection, statement: PostgresStatement, approved: Classification, approved_rows: int | None
) -> None:
    """Raise ChangedSinceQuestion when the approval no longer covers what the statement would do now.

    Run on the writer session the statement then runs on (its search path), in its transaction when it has one. The
    catalog queries' settings (`catalog.for_catalog_queries`) hold for the checks, and the session's own for the
    statement after them.
    """
    if statement.in_transaction:
        # Locking a view locks what its query reads too, down its chain: neither can be redefined until the end.
        await lock_changed_tables(connection, approved)
        await lock_read_relations(connection, [name.quoted() for name in statement.relations])
    # After the locks: a relation locked keeps its name (renaming one waits for them) until the statement has run.
    await check_names_unchanged(connection, approved)
    await catalog.for_catalog_queries(connection)
    await check_views_unchanged(connection, statement, approved)
    await check_calls_unchanged(connection, statement, approved)
    await check_fired_unchanged(connection, approved)
    await check_stored_code_unchanged(connection, approved)
    await check_code_version_unchanged(connection, approved)
    await check_cascades_unchanged(connection, approved)
    # A count was shown only for a dry run of code a rollback undoes: it must still be so.
    if approved_rows is not None and (reasons := await changed_since_dry_run(connection, statement, approved)):
        raise ChangedSinceQuestion("; ".join(reasons))
    await catalog.with_session_settings(connection)  # for the statement itself


async def check_data_change_names(connection: Connection, approved: Classification) -> None:
    """`check_names_unchanged` after a data change, before its transaction commits (which a raise rolls back).

    Creating a table of the same name in a schema searched first takes no lock of the statement's tables: one
    created between the check before the statement and the statement took the name all the same. Schema changes
    are left out: creating, dropping and renaming is what they do to names."""
    if approved.only_data_changes:
        await check_names_unchanged(connection, approved)


async def check_views_unchanged(connection: Connection, statement: PostgresStatement, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when a change through a view would now land elsewhere than the question showed."""
    now = (await views.through_views(connection, statement.classification)).through
    if set(now) == set(approved.through_views):
        return
    reasons = [f"it would {link.change}" for link in now if link not in approved.through_views]
    reasons += [f"it would no longer {link.change}" for link in approved.through_views if link not in now]
    raise ChangedSinceQuestion("; ".join(reasons))


async def check_calls_unchanged(connection: Connection, statement: PostgresStatement, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when the statement would now call a function with effects its question did not
    show: a view it reads redefined to call one, a function it calls redefined to write."""
    calls = await function_bodies.calls_with_effects(connection, statement)
    if unseen := [change for change in calls if change not in approved.changes]:
        raise ChangedSinceQuestion(
            "; ".join(f"it would now run code its question did not show: {change}" for change in unseen)
        )


def changes_rows(classification: Classification) -> bool:
    """Whether the statement inserts, updates, deletes or merges rows (among whatever else it does)."""
    return bool(set(classification.kinds) & DATA_KINDS)


async def check_stored_code_unchanged(connection: Connection, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when the stored code of the tables a data change reaches would now call what its
    question did not know of: a default, constraint or index added, a function of one replaced."""
    if not changes_rows(approved):
        return
    now, _ = await stored_code_calls(connection, approved)
    if unseen := [call for call in now if call not in approved.stored_code]:
        raise ChangedSinceQuestion("; ".join(unseen))


async def check_code_version_unchanged(connection: Connection, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when a function or procedure was created, replaced or dropped in the database since
    the question, for a statement that runs code created there (`Classification.code_version`)."""
    if approved.code_version is not None and await catalog.code_version(connection) != approved.code_version:
        raise ChangedSinceQuestion(
            "a function or procedure of the database was created, replaced or dropped meanwhile, so the code this "
            "statement runs, or the code that calls, may not be what the question showed"
        )


async def check_cascades_unchanged(connection: Connection, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when the change would now reach tables its question did not name: through foreign
    keys, or as the children and partitions of a table it empties or drops."""
    if unseen := [line for line in await cascade_lines(connection, approved) if line not in approved.cascades]:
        raise ChangedSinceQuestion(f"now: {' '.join(unseen)}")


async def check_names_unchanged(connection: Connection, approved: Classification) -> None:
    """Raise ChangedSinceQuestion when a name the statement uses means another relation than when it was asked about:
    one of that name in a schema searched first, or another renamed to it (or dropped and made again)."""
    now = await catalog.resolved(connection, [name for name, _ in approved.resolved])
    if moved := names_moved(approved, now):
        raise ChangedSinceQuestion("; ".join(moved))
