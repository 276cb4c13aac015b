"""Red team of judging labelled functions by their bodies: reads SafeDB runs at once (read-only) that still
end another session, which no rollback undoes. Each test fails while the hole is open: it classifies the
read, runs it the way a read-only call would when SafeDB says it is read-only, and checks that the victim
sessions are still there and that SafeDB asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import (
    ENDER,
    PgDatabase,
    Victims,
    assert_asks_without_ending,
    database_with,
)
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio


SETUP = (
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 10), (2, 20)",
    ENDER,
    # A parameter's default is an expression the caller runs: the body never shows it.
    "CREATE FUNCTION defaulted(b boolean DEFAULT ender()) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN RETURN 1; END $$",
    "CREATE FUNCTION calls_defaulted() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT defaulted() $$",
    # A parameter, result or variable of a domain: each conversion to it runs the domain's check.
    "CREATE DOMAIN checked AS integer CHECK (VALUE IS NULL OR ender())",
    "CREATE FUNCTION takes_checked(x checked) RETURNS integer LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 1; END $$",
    "CREATE FUNCTION returns_checked() RETURNS checked LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 1; END $$",
    "CREATE FUNCTION declares_checked() RETURNS integer LANGUAGE plpgsql STABLE AS "
    "$$ DECLARE x checked := 1; BEGIN RETURN x; END $$",
    # An implicit cast to a parameter's type (a user-defined one).
    "CREATE TYPE wrapped AS (v integer)",
    "CREATE FUNCTION wrap(integer) RETURNS wrapped LANGUAGE sql VOLATILE AS "
    "$$ SELECT ROW($1 + CASE WHEN ender() THEN 0 ELSE 1 END)::wrapped $$",
    "CREATE CAST (integer AS wrapped) WITH FUNCTION wrap(integer) AS IMPLICIT",
    "CREATE FUNCTION takes_wrapped(w wrapped) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT ($1).v $$",
    # An operator of a user-defined type applied to parameters: the body names no relation or cast of it.
    "CREATE TYPE mood AS ENUM ('calm', 'angry')",
    "CREATE FUNCTION mood_eq(mood, mood) RETURNS boolean LANGUAGE sql VOLATILE AS "
    "$$ SELECT ender() AND $1::text = $2::text $$",
    "CREATE OPERATOR === (LEFTARG = mood, RIGHTARG = mood, FUNCTION = mood_eq)",
    "CREATE FUNCTION same_mood(a mood, b mood) RETURNS boolean LANGUAGE plpgsql STABLE AS "
    "$$ BEGIN RETURN a === b; END $$",
    # A body read as SafeDB's parser reads strings, run with the legacy string syntax the function sets.
    "CREATE FUNCTION legacy_strings() RETURNS text LANGUAGE sql STABLE SET standard_conforming_strings = off AS "
    "$body$ SELECT 'x\\'' || ender()::text --' $body$",
    # A function without a search path of its own runs in its caller's: here one that sets it.
    "CREATE FUNCTION helper() RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT true $$",
    "CREATE SCHEMA tricky",
    f"GRANT USAGE ON SCHEMA tricky TO {READER}",
    "CREATE FUNCTION tricky.helper() RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT public.ender() $$",
    "CREATE FUNCTION unpathed() RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT helper() $$",
    "CREATE FUNCTION pathed_caller() RETURNS boolean LANGUAGE sql STABLE SET search_path = tricky, public AS "
    "$$ SELECT unpathed() $$",
    # SECURITY DEFINER: its names resolve in schemas the reader may not use.
    "CREATE SCHEMA hidden",
    "CREATE VIEW hidden.ending AS SELECT public.ender() AS ended",
    "CREATE VIEW public.ending AS SELECT true AS ended",
    "CREATE FUNCTION definer_reads() RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER "
    "SET search_path = hidden, public AS $$ SELECT bool_and(ended) FROM ending $$",
    "CREATE FUNCTION hidden.helper() RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT public.ender() $$",
    "CREATE FUNCTION definer_calls() RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER "
    "SET search_path = hidden, public AS $$ SELECT unpathed() $$",
    # The planner turns NOT (a ==== b) into a !=== b: the negator's function runs.
    "CREATE FUNCTION plain_eq(a plain, b plain) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN RETURN a.id = b.id; END $$",
    "CREATE FUNCTION plain_ne(plain, plain) RETURNS boolean LANGUAGE sql VOLATILE AS "
    "$$ SELECT ender() AND $1.id <> $2.id $$",
    "CREATE OPERATOR ==== (LEFTARG = plain, RIGHTARG = plain, FUNCTION = plain_eq, NEGATOR = !===)",
    "CREATE OPERATOR !=== (LEFTARG = plain, RIGHTARG = plain, FUNCTION = plain_ne, NEGATOR = ====)",
    # An aggregate whose final function is a built-in labelled stable that reads a relation named at run
    # time (here a view that ends sessions).
    "CREATE VIEW ender_view AS SELECT ender() AS ended",
    "CREATE FUNCTION keep(regclass, integer) RETURNS regclass LANGUAGE sql IMMUTABLE AS $$ SELECT $1 $$",
    "CREATE AGGREGATE as_xml(boolean, boolean, text ORDER BY integer) "
    "(SFUNC = keep, STYPE = regclass, FINALFUNC = table_to_xml, INITCOND = 'ender_view')",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT defaulted()", id="default-argument"),
        pytest.param("SELECT calls_defaulted()", id="default-argument-in-body"),
        pytest.param("SELECT takes_checked(1)", id="domain-parameter"),
        pytest.param("SELECT returns_checked()", id="domain-result"),
        pytest.param("SELECT declares_checked()", id="domain-variable"),
        pytest.param("SELECT takes_wrapped(1)", id="implicit-cast-to-parameter"),
        pytest.param("SELECT same_mood('calm', 'angry')", id="operator-on-parameters"),
        pytest.param("SELECT legacy_strings()", id="standard-conforming-strings-off"),
        pytest.param("SELECT pathed_caller()", id="callee-in-callers-search-path"),
        pytest.param("SELECT definer_reads()", id="security-definer-hidden-view"),
        pytest.param("SELECT definer_calls()", id="security-definer-callee-path"),
        pytest.param("SELECT NOT (a ==== b) FROM plain a, plain b", id="operator-negator"),
        pytest.param("SELECT as_xml(false, false, '') WITHIN GROUP (ORDER BY id) FROM plain", id="aggregate-builtin"),
    ],
)
async def test_a_read_that_ends_sessions_asks(pg: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(pg, victims, sql)
