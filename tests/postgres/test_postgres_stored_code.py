"""Built-in functions with effects a rollback does not undo, reached through stored code: constraints,
column and domain defaults, domains at any depth, and casts in the statement. A preview must not run them
(a sequence moves, another session ends), and neither may planning it: the planner folds functions
labelled immutable, and a user-defined function's label is not enforced."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from safedb.sql.classification import ChangeKind
from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase, without_fingerprints
from tests.postgres_server import READER, WRITER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE SEQUENCE moved START 100",
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 1), (7, 7)",
    "CREATE TABLE checked_builtin (v integer CHECK (setval('moved', 1, false) > 0))",
    "CREATE TABLE defaulted_builtin (v integer, w bigint DEFAULT setval('moved', 1, false))",
    "CREATE DOMAIN drawn AS bigint DEFAULT nextval('moved')",
    "CREATE TABLE domain_defaulted (id drawn, v text)",
    "CREATE DOMAIN drawing AS integer CHECK (nextval('moved') > 0)",
    "CREATE TABLE domain_checked (v drawing)",
    "CREATE FUNCTION bump() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('moved'); RETURN true; END $$",
    "CREATE DOMAIN bumped_1 AS integer CHECK (bump())",
    "CREATE DOMAIN bumped_2 AS bumped_1",
    "CREATE DOMAIN bumped_3 AS bumped_2",
    "CREATE TABLE nested (v bumped_3[])",
    "CREATE DOMAIN resetting AS integer CHECK (setval('moved', VALUE, false) > 0)",
    "CREATE DOMAIN ending AS integer CHECK (pg_terminate_backend(VALUE))",
    # Labelled IMMUTABLE, so the planner folds a call with constant arguments, running it.
    "CREATE FUNCTION end_session(p integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM pg_terminate_backend(p); RETURN p; END $$",
    # Built-ins in a view and in a policy: pg_depend does not record them.
    "CREATE VIEW resets AS SELECT setval('moved', 1000) AS x",
    "CREATE VIEW ends AS SELECT pg_terminate_backend(pid) AS ended, pid FROM pg_stat_activity "
    "WHERE application_name = 'victim'",
    "CREATE TABLE guarded (id integer)",
    "INSERT INTO guarded VALUES (1), (7)",
    "ALTER TABLE guarded ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE guarded FORCE ROW LEVEL SECURITY",
    "CREATE POLICY moving ON guarded USING (setval('moved', 555) > 0 OR current_user = 'safedb_reader')",
    # A user-defined assignment cast, applied to the 5 of `INSERT INTO casted VALUES (5)` unseen.
    "CREATE TYPE boxed AS (a integer)",
    "CREATE FUNCTION box(integer) RETURNS boxed LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM setval('moved', 777); RETURN ROW($1)::boxed; END $$",
    "CREATE CAST (integer AS boxed) WITH FUNCTION box(integer) AS ASSIGNMENT",
    "CREATE TABLE casted (c boxed)",
    # Through an updatable view, the table's default (folded by the planner: IMMUTABLE) ends sessions.
    "CREATE FUNCTION folded(integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim'; "
    "RETURN $1; END $$",
    "CREATE TABLE beneath (a integer, b integer DEFAULT folded(1))",
    "CREATE VIEW above AS SELECT a FROM beneath",
    # A partition key computed by a user function: routing calls it for every row.
    "CREATE FUNCTION keyed(integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM nextval('moved'); RETURN $1; END $$",
    "CREATE TABLE parted (id integer, v integer) PARTITION BY RANGE (keyed(id))",
    "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (1000)",
    "INSERT INTO parted VALUES (1, 1)",
    # A user-defined implicit cast from an enum to text: a foreign key's check applies it, and so does a
    # statement that meets the enum inside a row or an array.
    "CREATE TYPE color AS ENUM ('red', 'green')",
    "CREATE FUNCTION color_text(color) RETURNS text LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM nextval('moved'); RETURN $1::name::text; END $$",
    "CREATE CAST (color AS text) WITH FUNCTION color_text(color) AS IMPLICIT",
    "CREATE TABLE named (name text PRIMARY KEY)",
    "INSERT INTO named VALUES ('red'), ('blue')",
    "CREATE TABLE colored (c color REFERENCES named (name))",
    "INSERT INTO colored VALUES ('red')",
    "CREATE TYPE paint AS (c color)",
    "CREATE TABLE paints (p paint, cs color[])",
    "INSERT INTO paints VALUES (ROW('red'), ARRAY['green']::color[])",
    "CREATE TABLE words (t text, ts text[])",
    # A rule's action, which planning takes in and folds.
    "CREATE TABLE ruled (id integer)",
    "CREATE TABLE ruled_log (id integer)",
    "CREATE RULE logged AS ON INSERT TO ruled DO ALSO INSERT INTO ruled_log VALUES (folded(1))",
    # A policy the reader's count(*) would run.
    "CREATE TABLE watched (id integer)",
    "INSERT INTO watched VALUES (1)",
    "ALTER TABLE watched ENABLE ROW LEVEL SECURITY",
    f"CREATE POLICY counting ON watched FOR SELECT TO {READER} USING (folded(1) > 0)",
    f"GRANT SELECT ON watched TO {READER}",
)


# Operators the syntax implies: USING and NATURAL joins (`=`), BETWEEN (`>=`, `<=`). In a database of their
# own: a user-defined `=` makes every statement that meets its type ask.
OPERATORS_SETUP = (
    "CREATE SEQUENCE moved START 100",
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 1), (7, 7)",
    "CREATE TYPE ranked AS (a integer)",
    "CREATE FUNCTION ranked_eq(ranked, ranked) RETURNS boolean LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM setval('moved', 31337); RETURN $1.a = $2.a; END $$",
    "CREATE FUNCTION ranked_ge(ranked, ranked) RETURNS boolean LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN PERFORM setval('moved', 4444); RETURN $1.a >= $2.a; END $$",
    "CREATE OPERATOR = (LEFTARG = ranked, RIGHTARG = ranked, FUNCTION = ranked_eq)",
    "CREATE OPERATOR >= (LEFTARG = ranked, RIGHTARG = ranked, FUNCTION = ranked_ge)",
    "CREATE TABLE left_side (id integer, r ranked)",
    "CREATE TABLE right_side (r ranked)",
    "INSERT INTO left_side VALUES (1, ROW(1)), (2, ROW(2))",
    "INSERT INTO right_side VALUES (ROW(1))",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def operators_pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, OPERATORS_SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.fixture(params=[WRITER, READER])
def victim(pg: PgDatabase, request: pytest.FixtureRequest) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session of the writer's role, which the writer may end, or of the reader's, which a read may."""
    url = pg.server.url(request.param, pg.name) + "?application_name=victim"
    with psycopg.connect(url, autocommit=True) as connection:
        yield connection


def _alive(pg: PgDatabase, pid: int) -> bool:
    return pg.rows(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == [(1,)]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO checked_builtin VALUES (1)",
        "INSERT INTO defaulted_builtin (v) VALUES (1)",
        "INSERT INTO domain_defaulted (v) VALUES ('a')",
        "INSERT INTO domain_checked VALUES (5)",
        "INSERT INTO nested VALUES (ARRAY[1])",
        "DELETE FROM plain WHERE id = 7::resetting",
        "DELETE FROM plain WHERE id = CAST(7 AS resetting)",
        "DELETE FROM plain WHERE id = resetting(7)",
        "DELETE FROM plain WHERE id IN (SELECT x FROM resets)",
        "DELETE FROM plain WHERE id IN (SELECT id FROM guarded)",
        "INSERT INTO casted VALUES (5)",
        "INSERT INTO parted VALUES (5, 5)",
        "UPDATE parted SET id = id + 1",
        "DELETE FROM named WHERE name = 'blue'",
        "INSERT INTO words (t) SELECT (p).c FROM paints",
        "INSERT INTO words (ts) SELECT cs FROM paints",
        "INSERT INTO words (t) SELECT cs[1] FROM paints",
    ],
)
async def test_a_preview_never_moves_a_sequence_through_stored_code(pg: PgDatabase, sql: str) -> None:
    before = pg.rows("SELECT last_value, is_called FROM moved")

    (impact,) = await pg.previews(sql)

    assert pg.rows("SELECT last_value, is_called FROM moved") == before
    assert impact.rows_affected is None


async def test_a_cast_to_a_domain_is_judged_by_the_functions_its_checks_call(pg: PgDatabase) -> None:
    resetting, ending, nested = await pg.classifications(
        "SELECT 7::resetting", "SELECT 0::ending", "SELECT ARRAY[1]::bumped_3[]"
    )

    assert ChangeKind.SEQUENCE in resetting.kinds
    assert ChangeKind.FUNCTION_CALL in ending.kinds
    assert ChangeKind.FUNCTION_CALL in nested.kinds


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("SELECT * FROM resets", ChangeKind.SEQUENCE),
        ("SELECT * FROM ends", ChangeKind.FUNCTION_CALL),
        ("SELECT * FROM guarded", ChangeKind.SEQUENCE),
        ("SELECT 5::boxed", ChangeKind.FUNCTION_CALL),
        ("SELECT upper((p).c) FROM paints", ChangeKind.FUNCTION_CALL),
    ],
)
async def test_a_read_that_runs_code_with_effects_asks(pg: PgDatabase, sql: str, kind: ChangeKind) -> None:
    """Through a view or a policy (built-ins included), a cast, or an operator the syntax implies."""
    (classification,) = await pg.classifications(sql)

    assert kind in classification.kinds


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM left_side NATURAL JOIN right_side",
        "SELECT * FROM left_side JOIN right_side USING (r)",
        "SELECT * FROM left_side WHERE r BETWEEN ROW(0)::ranked AND ROW(1)::ranked",
        "DELETE FROM plain WHERE EXISTS (SELECT 1 FROM left_side JOIN right_side USING (r))",
        "DELETE FROM left_side WHERE r BETWEEN ROW(0)::ranked AND ROW(1)::ranked",
    ],
)
async def test_operators_the_syntax_implies_are_judged_by_their_functions(operators_pg: PgDatabase, sql: str) -> None:
    before = operators_pg.rows("SELECT last_value, is_called FROM moved")
    database = operators_pg.open()
    try:
        classification = await database.classify(sql)
        impact = await database.preview(classification)
    finally:
        await database.aclose()

    assert ChangeKind.FUNCTION_CALL in classification.kinds
    assert operators_pg.rows("SELECT last_value, is_called FROM moved") == before
    assert impact.rows_affected is None


async def test_an_operator_of_a_type_the_statement_never_meets_does_not_count(operators_pg: PgDatabase) -> None:
    """The user-defined `=` and `>=` take `ranked` values, which these statements never see."""
    database = operators_pg.open()
    try:
        read = await database.classify("SELECT * FROM plain WHERE id = 1 OR v BETWEEN 1 AND 5")
        delete = await database.preview(await database.classify("DELETE FROM plain WHERE id = 7"))
    finally:
        await database.aclose()

    assert read.read_only
    assert delete.rows_affected == 1


async def test_a_read_of_a_view_over_system_views_stays_a_read(pg: PgDatabase) -> None:
    pg.run_as_owner("CREATE VIEW sessions AS SELECT pid, state FROM pg_stat_activity")
    (classification,) = await pg.classifications("SELECT * FROM sessions WHERE pid BETWEEN 1 AND 10")

    assert classification.read_only


async def test_a_preview_never_ends_another_session_through_a_domain(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews(f"DELETE FROM plain WHERE id = {victim.info.backend_pid}::ending")

    assert _alive(pg, victim.info.backend_pid)
    assert impact.rows_affected is None


async def test_a_preview_never_ends_another_session_through_a_view(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews("DELETE FROM plain WHERE id IN (SELECT ended::integer FROM ends)")

    assert _alive(pg, victim.info.backend_pid)
    assert impact.rows_affected is None


async def test_the_planner_is_not_asked_through_an_updatable_view(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews("INSERT INTO above (a) VALUES (1)")

    assert _alive(pg, victim.info.backend_pid)
    assert "no dry run and no planner's estimate" in impact.lines[0]


async def test_the_planner_is_not_asked_for_a_table_with_rules(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    (impact,) = await pg.previews("INSERT INTO ruled VALUES (5)")

    assert _alive(pg, victim.info.backend_pid)
    assert "no dry run and no planner's estimate" in impact.lines[0]


async def test_a_size_preview_does_not_count_rows_through_a_policy(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    """Counting would run the policy's function as the reader; the planner's estimate stands in."""
    (impact,) = await pg.previews("TRUNCATE watched")

    assert _alive(pg, victim.info.backend_pid)
    assert "about" in impact.lines[0]


async def test_a_drop_dry_run_does_not_queue_for_a_lock_others_would_wait_behind(pg: PgDatabase) -> None:
    pg.run_as_owner("CREATE TABLE busy (id integer)")
    with pg.server.connect(pg.name, WRITER) as holder:
        holder.autocommit = False
        holder.execute(b"SELECT * FROM busy")  # holds ACCESS SHARE until the transaction ends
        (impact,) = await pg.previews("DROP TABLE busy")
        waiting = pg.rows("SELECT count(*) FROM pg_locks WHERE NOT granted")
        holder.rollback()

    assert "lock timeout" in " ".join(impact.lines)
    assert waiting == [(0,)]


async def test_the_planner_is_not_asked_when_it_may_run_a_user_function(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]]
) -> None:
    sql = f"DELETE FROM plain WHERE id = end_session({victim.info.backend_pid})"
    (impact,) = await pg.previews(sql)
    (classification,) = await pg.classifications(sql)

    assert _alive(pg, victim.info.backend_pid)
    assert impact.rows_affected is None
    assert "no dry run and no planner's estimate" in impact.lines[0]
    # The question names the function, whose body shows more than its label.
    assert "end_session (labelled immutable, but it calls pg_terminate_backend())" in without_fingerprints(
        "; ".join(map(str, classification.changes))
    )


async def test_a_sequence_in_a_default_still_gets_the_planners_estimate(pg: PgDatabase) -> None:
    """`nextval` is volatile: the planner never runs it, so an estimate is safe where a dry run is not."""
    (impact,) = await pg.previews("INSERT INTO domain_defaulted (v) SELECT 'x' FROM generate_series(1, 3)")

    assert "by the planner's estimate; no dry run" in impact.lines[0]
    assert "moves a sequence" in impact.lines[0]


async def test_functions_of_an_installed_extension_are_trusted_by_their_label(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE EXTENSION IF NOT EXISTS citext",
        "CREATE TABLE tagged (id integer PRIMARY KEY, tag citext CHECK (tag <> 'forbidden'::citext))",
        "INSERT INTO tagged VALUES (1, 'a'), (2, 'b')",
    )

    update, delete = await pg.previews("UPDATE tagged SET tag = upper(tag::text)", "DELETE FROM tagged WHERE id = 1")

    assert (update.rows_affected, delete.rows_affected) == (2, 1)
    assert pg.rows("SELECT tag::text FROM tagged ORDER BY id") == [("a",), ("b",)]


async def test_a_function_the_extensions_owner_adds_to_it_is_not_trusted(pg: PgDatabase) -> None:
    pg.run_as_owner(
        "CREATE EXTENSION IF NOT EXISTS citext",
        "CREATE FUNCTION adopted() RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
        "$$ BEGIN PERFORM setval('moved', 999); RETURN 1; END $$",
        "ALTER EXTENSION citext ADD FUNCTION adopted()",
    )
    before = pg.rows("SELECT last_value, is_called FROM moved")

    (impact,) = await pg.previews("DELETE FROM plain WHERE id = adopted()")

    assert pg.rows("SELECT last_value, is_called FROM moved") == before
    assert impact.rows_affected is None


async def test_extension_functions_that_run_query_text_ask(pg: PgDatabase) -> None:
    pg.run_as_owner("CREATE EXTENSION IF NOT EXISTS tablefunc")
    (classification,) = await pg.classifications(
        "SELECT * FROM crosstab('SELECT 1, 1, 1') AS t (r integer, c1 integer)"
    )

    assert ChangeKind.FUNCTION_CALL in classification.kinds
