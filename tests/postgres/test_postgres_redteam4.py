"""Red team, fourth pass: statements SafeDB runs without asking (a read, or the dry run made before anyone
answers) that still have effects no rollback undoes, or that change a pooled session for later calls.

- code the planner runs of its own accord that SafeDB does not read: partition key expressions and extended
  statistics expressions (both folded whenever the relation is planned, also in a dry run as the writer),
  and, for `EXPLAIN UPDATE/DELETE`, the actions of the target's non-SELECT rules (and the defaults of the
  tables those actions insert into);
- domain checks that run when a value is converted to a row type the statement meets only as a relation it
  reads (`jsonb_populate_record(h, ...)`, an untyped literal beside a whole-row value);
- extension functions trusted by their volatility label that do more than it says: xml2's `xpath_table`
  (STABLE) runs SQL built from its text arguments, several statements even; isn's `isn_weak(boolean)`
  (IMMUTABLE) sets a C variable of the session that neither a rollback nor `DISCARD ALL` resets;
- `EXPLAIN EXECUTE name(args)`, whose arguments PostgreSQL evaluates and SafeDB does not examine.

"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.postgres import PostgresDatabase
from safedb.errors import DeniedByPolicy, QueryFailed
from tests.postgres.conftest import (
    ENDER,
    FOLDED_ENDER_TABLES,
    PgDatabase,
    Victims,
    assert_asks_without_ending,
    database_with,
    ended,
)
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio


SETUP = (
    ENDER,
    *FOLDED_ENDER_TABLES,
    # EXPLAIN UPDATE/DELETE plans the actions of the target's rules, and the defaults of what they insert into.
    "CREATE TABLE ruled (id integer, v integer)",
    "CREATE TABLE ruled_log (id integer, n integer)",
    "CREATE RULE ruled_delete AS ON DELETE TO ruled DO ALSO INSERT INTO ruled_log VALUES (old.id, folded_ender())",
    "CREATE TABLE logged (id integer, n integer DEFAULT folded_ender())",
    "CREATE TABLE ruled_default (id integer, v integer)",
    "CREATE RULE ruled_default_update AS ON UPDATE TO ruled_default DO ALSO INSERT INTO logged (id) VALUES (old.id)",
    # A column of a domain whose check ends sessions (as in function_bodies_redteam's `checked`).
    "CREATE DOMAIN checked AS integer CHECK (VALUE IS NULL OR ender())",
    "CREATE TABLE holders (id integer, d checked)",
    "INSERT INTO holders VALUES (1, NULL)",
    # For xml2's xpath_table: a relation with an XML document.
    "CREATE TABLE docs (id integer, x text)",
    "INSERT INTO docs VALUES (1, '<a>1</a>')",
    "CREATE SEQUENCE tickets",
    # A range type: PostgreSQL gives it constructors, and a cast to its multirange, written in `internal`.
    "CREATE TYPE floatrange AS RANGE (subtype = float8, subtype_diff = float8mi)",
    "CREATE TABLE spans (id integer, span floatrange)",
    "CREATE TABLE plain (id integer, v integer)",
    "INSERT INTO plain VALUES (1, 1)",
)


def _superuser_setup(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        "CREATE EXTENSION xml2",
        "CREATE EXTENSION isn",
        # Only a superuser may write a function in `internal`; this one runs a built-in that is no constructor.
        "CREATE FUNCTION public.text_length(text) RETURNS integer LANGUAGE internal IMMUTABLE STRICT AS 'textlen'",
    )


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _superuser_setup) as database:
        yield database


def _one_reader(pg: PgDatabase) -> PostgresDatabase:
    """A database whose every read goes through the same pooled session, as consecutive calls may."""
    return PostgresDatabase(pg.reader_url(), QueryLimits(), writer_dsn=pg.writer_url(), readers=1, writers=1)


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT * FROM keyed_parted", id="partition-key-expression-folded"),
        pytest.param("SELECT count(*) FROM stats_expr", id="statistics-expression-folded"),
        pytest.param("EXPLAIN DELETE FROM ruled", id="explain-delete-plans-rule-action"),
        pytest.param("EXPLAIN UPDATE ruled_default SET v = 1", id="explain-update-plans-rule-target-default"),
        pytest.param("""SELECT jsonb_populate_record(h, '{"d": 5}') FROM holders AS h""", id="populate-row-type"),
        pytest.param("SELECT ARRAY[h, '(2,5)'] FROM holders AS h", id="untyped-literal-to-row-type"),
        pytest.param("SELECT h FROM holders AS h UNION ALL SELECT '(2,5)'", id="untyped-literal-union-row-type"),
        pytest.param(
            "SELECT * FROM xpath_table('id', 'x', 'docs', '/a', 'public.ender()') AS t(id integer, a text)",
            id="xml2-xpath-table-runs-sql",
        ),
    ],
)
async def test_a_read_that_ends_sessions_asks(pg: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(pg, victims, sql)


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("UPDATE stats_expr SET v = v WHERE id = 1", id="target-statistics-expression"),
        pytest.param("INSERT INTO plain SELECT * FROM keyed_parted", id="read-partition-key-expression"),
        pytest.param(
            "UPDATE plain SET v = v WHERE EXISTS (SELECT FROM xpath_table('id', 'x', 'docs', '/a', "
            "'public.ender()') AS t(id integer, a text))",
            id="xml2-xpath-table",
        ),
    ],
)
async def test_the_dry_run_asked_about_ends_no_session(pg: PgDatabase, victims: Victims, sql: str) -> None:
    """The dry run runs as the writer before anyone answers: it must not end the writer's other sessions."""
    await pg.previews(sql)

    assert ended(victims) == [], f"the dry run of {sql!r} ended another session"


async def test_the_dry_run_of_xpath_table_moves_no_sequence(pg: PgDatabase) -> None:
    """xpath_table's condition runs as the writer in the dry run, where nextval() works and never rolls back."""
    before = pg.rows("SELECT last_value, is_called FROM tickets")

    await pg.previews(
        "UPDATE plain SET v = v WHERE EXISTS (SELECT FROM xpath_table('id', 'x', 'docs', '/a', "
        "'nextval(''tickets'') > 0') AS t(id integer, a text))"
    )

    assert pg.rows("SELECT last_value, is_called FROM tickets") == before


async def test_xpath_table_leaves_no_prepared_statement_in_the_pooled_reader(pg: PgDatabase) -> None:
    """xpath_table runs every statement of its text: a PREPARE outlives the read's rollback, on the pooled
    session the next calls (any client's) get; `EXPLAIN EXECUTE` then evaluates its arguments unexamined."""
    database = _one_reader(pg)
    try:
        leak = await database.classify(
            "SELECT * FROM xpath_table('id', 'x', 'docs; PREPARE leaked(integer) AS SELECT $1; "
            "SELECT id, x FROM docs', '/a', 'true') AS t(id integer, a text)"
        )
        if leak.read_only:
            await database.read(leak)
        # The session's own prepared statements are SafeDB's (`prepared.ReaderStatement`).
        listing = await database.classify(
            "SELECT name FROM pg_prepared_statements "
            "WHERE name NOT IN ('safedb_function_facts', 'safedb_begin_catalog_work')"
        )
        assert (await database.read(listing)).rows == ()
    finally:
        await database.aclose()


@pytest.mark.parametrize("sql", ["EXPLAIN EXECUTE leaked(pg_terminate_backend(1)::integer)", "EXPLAIN EXECUTE leaked"])
async def test_explain_execute_is_refused_as_execute_is(pg: PgDatabase, sql: str) -> None:
    """PostgreSQL evaluates the arguments of `EXPLAIN EXECUTE name(...)` (when the session holds `name`); SafeDB's
    sessions hold no prepared statements of a caller's, so it is refused like EXECUTE."""
    with pytest.raises(DeniedByPolicy, match="EXECUTE works on state kept in one database session"):
        await pg.classifications(sql)


async def test_isn_weak_mode_does_not_outlive_its_read(pg: PgDatabase) -> None:
    """isn_weak(true) is labelled immutable but switches the session to accepting bad check digits, a C variable
    that no rollback resets: every later read on that pooled session (any client's) parses ISBNs otherwise."""
    database = _one_reader(pg)
    try:
        switch = await database.classify("SELECT isn_weak(true)")
        if switch.read_only:
            await database.read(switch)
        assert not switch.read_only
        probe = await database.classify("SELECT '9780393040028'::ean13")  # an invalid check digit
        with pytest.raises(QueryFailed, match="invalid check digit"):
            await database.read(probe)
    finally:
        await database.aclose()


async def test_isn_weak_mode_set_by_a_dry_run_does_not_reach_an_approved_write(pg: PgDatabase) -> None:
    """The dry run (before anyone answers) may call isn_weak(true) on a writer session, which `DISCARD ALL` does
    not reset: a later approved statement on that session stores an invalid ISBN, flagged with `!`."""
    database = _one_reader(pg)
    try:
        question = await database.classify("UPDATE plain SET v = v WHERE isn_weak(true)")
        await database.preview(question)  # asked, never approved
        approved = await database.classify("UPDATE plain SET v = v WHERE isn_weak()")
        outcome = await database.write(approved)
        assert outcome.rows_affected == 0, "the writer session is still in isn's weak mode"
    finally:
        await database.aclose()


@pytest.mark.parametrize(
    "sql",
    ["SELECT * FROM spans", "SELECT floatrange(1, 2)", "SELECT floatmultirange(floatrange(1, 2))"],
)
async def test_the_constructors_of_a_range_type_are_harmless(pg: PgDatabase, sql: str) -> None:
    """They are written in `internal` (built-in C code), which SafeDB cannot examine: every read of a table with a
    column of a user-defined range type asked (the cast from the range to its multirange is one)."""
    (classification,) = await pg.classifications(sql)

    assert classification.read_only, classification.summary


async def test_another_internal_function_still_asks(pg: PgDatabase) -> None:
    (classification,) = await pg.classifications("SELECT public.text_length('abc')")

    assert not classification.read_only
