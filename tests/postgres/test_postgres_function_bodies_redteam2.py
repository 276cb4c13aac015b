"""Red team, second pass: reads SafeDB runs at once (read-only) that still end another session, which no
rollback undoes, through code no earlier check judged: functions the planner runs for `EXPLAIN`, operators
of user-defined types reached without the statement naming the type, a btree operator class's comparison
function, and a foreign table read from another server. Each test fails while the hole is open: it
classifies the read, runs it the way a read-only call would when SafeDB says it is read-only, and checks
that the victim sessions are still there and that SafeDB asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import (
    ENDER,
    PgDatabase,
    Victims,
    assert_asks_without_ending,
    database_with,
    loopback_server,
)
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio


_COMPARISONS = {"lt": "<", "le": "<=", "eq": "=", "ge": ">=", "gt": ">"}

# No domain and no user-defined cast here: a PL/pgSQL body with variables would otherwise meet their types.
SETUP = (
    "CREATE TABLE plain (id integer PRIMARY KEY, v integer)",
    "INSERT INTO plain VALUES (1, 10), (2, 20)",
    ENDER,
    # EXPLAIN plans: the planner folds calls of immutable functions with constant arguments, evaluates
    # stable ones to estimate selectivity, and puts column defaults into an INSERT's plan.
    "CREATE FUNCTION folded_ender() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN ender(); END $$",
    "CREATE FUNCTION estimated_ender() RETURNS integer LANGUAGE plpgsql STABLE AS "
    "$$ BEGIN RETURN ender()::integer; END $$",
    "CREATE TABLE defaulted (b boolean DEFAULT folded_ender())",
    # An operator of a user-defined type whose function ends sessions.
    "CREATE TYPE mood AS ENUM ('calm', 'angry')",
    "CREATE FUNCTION mood_eq(mood, mood) RETURNS boolean LANGUAGE sql VOLATILE AS "
    "$$ SELECT ender() AND $1::text = $2::text $$",
    "CREATE OPERATOR === (LEFTARG = mood, RIGHTARG = mood, FUNCTION = mood_eq)",
    # ... whose operands are produced by another operator (its result type), untyped literals, the
    # arguments of a polymorphic function, or PL/pgSQL variables of that type.
    "CREATE FUNCTION to_mood(integer, integer) RETURNS mood LANGUAGE sql IMMUTABLE AS $$ SELECT 'calm'::mood $$",
    "CREATE OPERATOR <%> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = to_mood)",
    "CREATE FUNCTION int_mood(integer, mood) RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT ender() $$",
    "CREATE OPERATOR <=> (LEFTARG = integer, RIGHTARG = mood, FUNCTION = int_mood)",
    "CREATE FUNCTION poly_same(a anyelement, b anyelement) RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT a === b $$",
    "CREATE TABLE moods (m mood)",
    "INSERT INTO moods VALUES ('calm')",
    "CREATE FUNCTION same_moods() RETURNS boolean LANGUAGE sql STABLE AS "
    "$$ SELECT bool_and(poly_same(m, m)) FROM moods $$",
    "CREATE FUNCTION variable_moods() RETURNS boolean LANGUAGE plpgsql STABLE AS "
    "$$ DECLARE a mood := 'calm'; b mood := 'angry'; BEGIN RETURN a === b; END $$",
    # A type with a btree operator class of its own (made by a superuser, in the fixture): sorting and
    # DISTINCT compare with its comparison function, not with an operator the statement names.
    "CREATE TYPE grade AS ENUM ('low', 'high')",
    *(
        f"CREATE FUNCTION grade_{name}(grade, grade) RETURNS boolean LANGUAGE sql IMMUTABLE AS "
        f"$$ SELECT $1::text {symbol} $2::text $$"
        for name, symbol in _COMPARISONS.items()
    ),
    "CREATE FUNCTION grade_cmp(grade, grade) RETURNS integer LANGUAGE sql IMMUTABLE AS "
    "$$ SELECT CASE WHEN ender() AND $1::text < $2::text THEN -1 WHEN $1::text > $2::text THEN 1 ELSE 0 END $$",
    *(
        f"CREATE OPERATOR public.{symbol} (LEFTARG = grade, RIGHTARG = grade, FUNCTION = grade_{name})"
        for name, symbol in _COMPARISONS.items()
    ),
    "CREATE TABLE grades (g grade)",
    "INSERT INTO grades VALUES ('high'), ('low')",
    # A second btree order for a built-in type (a family of its own, made by a superuser): `ORDER BY n USING
    # <#` sorts with that family's comparison function.
    "CREATE FUNCTION odd_cmp(integer, integer) RETURNS integer LANGUAGE sql IMMUTABLE AS "
    "$$ SELECT CASE WHEN ender() THEN btint4cmp($1, $2) ELSE 0 END $$",
    *(
        f"CREATE OPERATOR public.{symbol}# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = int4{name})"
        for name, symbol in _COMPARISONS.items()
    ),
    "CREATE OPERATOR public.+# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = int4pl)",
    "CREATE TABLE numbers (n integer)",
    "INSERT INTO numbers VALUES (2), (1)",
    # What a foreign table reads on the other server (here this one) is a view that ends sessions.
    "CREATE VIEW ending_view AS SELECT ender() AS ended",
)


def _superuser_setup(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        "CREATE OPERATOR CLASS grade_order DEFAULT FOR TYPE grade USING btree AS OPERATOR 1 public.<, "
        "OPERATOR 2 public.<=, OPERATOR 3 public.=, OPERATOR 4 public.>=, OPERATOR 5 public.>, "
        "FUNCTION 1 grade_cmp(grade, grade)",
        "CREATE OPERATOR CLASS odd_order FOR TYPE integer USING btree AS OPERATOR 1 public.<#, "
        "OPERATOR 2 public.<=#, OPERATOR 3 public.=#, OPERATOR 4 public.>=#, OPERATOR 5 public.>#, "
        "FUNCTION 1 odd_cmp(integer, integer)",
        *loopback_server(server, name),
        "CREATE FOREIGN TABLE remote_ending (ended boolean) SERVER loopback OPTIONS (table_name 'ending_view')",
        f"GRANT SELECT ON remote_ending, ending_view TO {READER}",
    )


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _superuser_setup) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("EXPLAIN SELECT folded_ender()", id="explain-folds-immutable"),
        pytest.param("EXPLAIN SELECT * FROM plain WHERE id = estimated_ender()", id="explain-estimates-stable"),
        pytest.param("EXPLAIN INSERT INTO defaulted DEFAULT VALUES", id="explain-plans-column-default"),
        pytest.param("SELECT 'calm' === 'angry'", id="operator-on-untyped-literals"),
        pytest.param("SELECT (1 <%> 2) === (2 <%> 1)", id="operator-on-operator-results"),
        pytest.param("SELECT 1 <=> 'calm'", id="operator-on-typed-and-untyped-operands"),
        pytest.param("SELECT poly_same('calm'::mood, 'angry'::mood)", id="operator-in-polymorphic-body"),
        pytest.param("SELECT same_moods()", id="operator-in-polymorphic-callee"),
        pytest.param("SELECT variable_moods()", id="operator-on-plpgsql-variables"),
        pytest.param("SELECT g FROM grades ORDER BY g", id="operator-class-comparison-order-by"),
        pytest.param("SELECT DISTINCT g FROM grades", id="operator-class-comparison-distinct"),
        pytest.param("SELECT n FROM numbers ORDER BY n USING <#", id="operator-family-of-a-built-in-type"),
        pytest.param("SELECT * FROM remote_ending", id="foreign-table-remote-view"),
    ],
)
async def test_a_read_that_ends_sessions_asks(pg: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(pg, victims, sql)


async def test_reads_that_reach_only_harmless_code_still_read(pg: PgDatabase) -> None:
    statements = (
        "EXPLAIN SELECT * FROM plain WHERE id = 1",
        "EXPLAIN DELETE FROM plain",
        "SELECT m FROM moods ORDER BY m",
        "SELECT 'a'::text = 'b', 1 + 1",
        "SELECT (1 <%> 2)::text",
        "SELECT n FROM numbers ORDER BY n",  # the default order: a second family for integer is not used
        "SELECT 1 +# 2",  # a user-defined operator whose function is built in
    )
    classifications = await pg.classifications(*statements)

    assert [str(change) for classification in classifications for change in classification.changes] == []
    database = pg.open()
    try:
        results = [(await database.read(classification)).rows for classification in classifications[2:]]
    finally:
        await database.aclose()
    assert results == [(("calm",),), ((False, 2),), (("calm",),), ((1,), (2,)), ((3,),)]
