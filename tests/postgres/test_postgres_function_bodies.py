"""A user-defined function labelled immutable or stable is judged, in a read, by what its body calls: the
label is not enforced, and a read would run the function as the reader (by default the writer's role too),
ending sessions or taking session-long locks."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from safedb.sql.classification import Classification
from safedb.sql.postgres_bodies import Unexaminable, read_body
from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase, without_fingerprints
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio

_END_VICTIMS = "(SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'victim')"

SETUP = (
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 10), (2, 20)",
    # Harmful bodies, each behind an honest-looking label.
    f"CREATE FUNCTION sql_ender() RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT {_END_VICTIMS} $$",
    f"CREATE FUNCTION atomic_ender() RETURNS boolean LANGUAGE sql STABLE BEGIN ATOMIC SELECT {_END_VICTIMS}; END",
    f"CREATE FUNCTION plpgsql_ender() RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM {_END_VICTIMS}; "
    "RETURN 1; END $$",
    "CREATE FUNCTION locker(v integer) RETURNS integer LANGUAGE plpgsql STABLE AS $$ DECLARE x integer; "
    "BEGIN x := v + pg_advisory_lock(v)::text::integer; RETURN v; END $$",
    "CREATE FUNCTION dynamic() RETURNS integer LANGUAGE plpgsql STABLE AS $$ DECLARE r integer; "
    "BEGIN EXECUTE 'SELECT 1' INTO r; RETURN r; END $$",
    # Harm two calls away, and a harmless function that calls itself.
    "CREATE FUNCTION middle() RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT sql_ender() $$",
    "CREATE FUNCTION outer_call() RETURNS boolean LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN middle(); END $$",
    "CREATE FUNCTION countdown(n integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN IF n <= 0 THEN RETURN 0; END IF; RETURN countdown(n - 1) + abs(n); END $$",
    "CREATE FUNCTION doubled(v integer) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT v * 2 $$",
    "CREATE FUNCTION total() RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT sum(v) FROM plain $$",
    # A name the function's own search path resolves elsewhere than the reader's.
    "CREATE FUNCTION helper() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$",
    "CREATE SCHEMA tricky",
    f"GRANT USAGE ON SCHEMA tricky TO {READER}",
    f"CREATE FUNCTION tricky.helper() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT {_END_VICTIMS}::integer $$",
    "CREATE FUNCTION pathed() RETURNS integer LANGUAGE sql STABLE SET search_path = tricky, public AS "
    "$$ SELECT helper() $$",
    # Through a view, an operator and an aggregate.
    "CREATE VIEW ending_view AS SELECT id, sql_ender() AS ended FROM plain",
    "CREATE FUNCTION ending_eq(plain, plain) RETURNS boolean LANGUAGE sql IMMUTABLE AS "
    "$$ SELECT sql_ender() AND $1.id = $2.id $$",
    "CREATE OPERATOR === (LEFTARG = plain, RIGHTARG = plain, FUNCTION = ending_eq)",
    "CREATE FUNCTION ending_step(integer, integer) RETURNS integer LANGUAGE sql IMMUTABLE AS "
    "$$ SELECT $1 + $2 + plpgsql_ender() $$",
    "CREATE AGGREGATE ending_sum(integer) (SFUNC = ending_step, STYPE = integer, INITCOND = '0')",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.fixture
def victim(pg: PgDatabase) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session of the reader's role, which a read could end."""
    with psycopg.connect(pg.server.url(READER, pg.name) + "?application_name=victim", autocommit=True) as connection:
        yield connection


def _details(classification: Classification) -> str:
    """The changes in words, without the fingerprints of the functions' definitions."""
    return without_fingerprints("; ".join(str(change) for change in classification.changes))


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT sql_ender()", "sql_ender (labelled stable, but it calls pg_terminate_backend())"),
        ("SELECT atomic_ender()", "atomic_ender (labelled stable, but it calls pg_terminate_backend())"),
        ("SELECT plpgsql_ender()", "plpgsql_ender (labelled immutable, but it calls pg_terminate_backend())"),
        ("SELECT locker(1)", "locker (labelled stable, but it calls pg_advisory_lock())"),
        ("SELECT dynamic()", "dynamic (labelled stable, but it runs SQL built at run time (EXECUTE)"),
        ("SELECT outer_call()", "outer_call (labelled stable, but it calls middle(), which is not harmless)"),
        ("SELECT pathed()", "pathed (labelled stable, but it calls helper(), which is not harmless)"),
        ("SELECT * FROM ending_view", "sql_ender (labelled stable, but it calls pg_terminate_backend())"),
        ("SELECT a.id FROM plain a, plain b WHERE a === b", "an operator whose function is labelled immutable"),
        ("SELECT ending_sum(id) FROM plain", "ending_sum (labelled immutable, but it calls ending_step()"),
    ],
)
async def test_a_read_asks_when_a_labelled_function_does_more(
    pg: PgDatabase, victim: psycopg.Connection[tuple[object, ...]], sql: str, reason: str
) -> None:
    (classification,) = await pg.classifications(sql)

    assert not classification.read_only
    assert reason in _details(classification)
    assert pg.rows(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {victim.info.backend_pid}") == [(1,)]


async def test_functions_whose_bodies_only_read_still_read(pg: PgDatabase) -> None:
    statements = ("SELECT doubled(21)", "SELECT total()", "SELECT countdown(3)", "SELECT helper()")
    classifications = await pg.classifications(*statements)

    assert [_details(classification) for classification in classifications] == ["", "", "", ""]
    database = pg.open()
    try:
        results = [(await database.read(classification)).rows for classification in classifications]
    finally:
        await database.aclose()
    assert results == [((42,),), ((30,),), ((6,),), ((1,),)]


async def test_a_body_in_another_language_cannot_be_examined(pg: PgDatabase) -> None:
    with pg.server.connect(pg.name) as admin:  # a function in an untrusted language needs a superuser
        admin.execute(b"CREATE FUNCTION absolute(integer) RETURNS integer LANGUAGE internal IMMUTABLE AS 'int4abs'")
    (classification,) = await pg.classifications("SELECT absolute(-4)")

    assert not classification.read_only
    assert "absolute (labelled immutable, but it is written in internal" in _details(classification)


def _plpgsql(body: str) -> str:
    return f"CREATE FUNCTION f(v integer) RETURNS SETOF integer LANGUAGE plpgsql STABLE AS $$ {body} $$"


@pytest.mark.parametrize(
    ("body", "calls"),
    [
        # An assignment's target runs too: its subscripts.
        ("DECLARE a integer[]; BEGIN a[abs(v)] := sign(v); RETURN; END", {"abs", "sign"}),
        ("DECLARE x integer; BEGIN x = length('q'); RETURN; END", {"length"}),
        ("DECLARE x integer := ascii('a'); c CURSOR FOR SELECT chr(65); BEGIN RETURN; END", {"ascii", "chr"}),
        ("BEGIN FOR i IN 1..strpos('ab', 'b') LOOP RETURN NEXT i; END LOOP; END", {"strpos"}),
        ("BEGIN RAISE NOTICE '%', md5('x'); RETURN QUERY SELECT v FROM plain WHERE lower('EXECUTE') = 'q'; END",
         {"md5", "lower"}),
    ],
)  # fmt: skip
def test_every_plpgsql_expression_is_read(body: str, calls: set[str]) -> None:
    statements = read_body("plpgsql", _plpgsql(body)).statements

    assert {ref.name for statement in statements for ref in statement.functions} == calls


@pytest.mark.parametrize(
    "body",
    [
        "BEGIN EXECUTE 'SELECT 1'; RETURN; END",
        "BEGIN RETURN QUERY EXECUTE 'SELECT 1'; END",
        "DECLARE r record; BEGIN FOR r IN EXECUTE 'SELECT 1' LOOP END LOOP; RETURN; END",
        "DECLARE c refcursor; BEGIN OPEN c FOR EXECUTE 'SELECT 1'; RETURN; END",
    ],
)
def test_sql_built_at_run_time_cannot_be_examined(body: str) -> None:
    with pytest.raises(Unexaminable, match="built at run time"):
        read_body("plpgsql", _plpgsql(body))
