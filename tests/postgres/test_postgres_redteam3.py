"""Red team, third pass: reads SafeDB runs at once (read-only) that still end another session, which no
rollback undoes, through code the planner runs of its own accord for a relation the statement reads (its
index expressions and predicates, its inheritance children's check constraints, its foreign children and
partitions) and through `EXPLAIN DECLARE`. Each test classifies the read, runs it the way a read-only call
would when SafeDB says it is read-only, and checks that the victim sessions are still there and that SafeDB
asks. Then reads an application's schema takes for granted, which must not ask."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import (
    ENDER,
    PgDatabase,
    Victims,
    assert_asks_without_ending,
    database_with,
    ended,
    loopback_server,
)
from tests.postgres_server import READER, WRITER, PostgresServer

pytestmark = pytest.mark.anyio


SETUP = (
    ENDER,
    "CREATE FUNCTION folded_ender() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN ender(); END $$",
    # The planner loads a table's index expressions and predicates, folding constants, whatever the query.
    "CREATE TABLE partly_indexed (id integer, v integer)",
    "CREATE INDEX partly_indexed_id ON partly_indexed (id) WHERE folded_ender()",
    "CREATE TABLE expression_indexed (id integer)",
    "CREATE INDEX expression_indexed_id ON expression_indexed ((id + folded_ender()::integer))",
    # ... and, for constraint exclusion, the check constraints of the children a read of their parent scans.
    "CREATE TABLE parent (ended boolean)",
    "CREATE TABLE checked_child (CHECK (folded_ender())) INHERITS (parent)",
    # What the foreign children read on the other server (here this one) is a view that ends sessions.
    "CREATE VIEW ending_view AS SELECT ender() AS ended",
    "CREATE TABLE foreign_parent (ended boolean)",
    "CREATE TABLE partitioned (ended boolean) PARTITION BY LIST (ended)",
    "CREATE TABLE plain (id integer, v integer)",
    # Row-level security as applications set it up: a SECURITY DEFINER helper, with a search path of its own,
    # reads a membership table the reader may not read.
    "CREATE TABLE memberships (member text, team integer)",
    f"INSERT INTO memberships VALUES ('{READER}', 1)",
    "CREATE FUNCTION my_teams() RETURNS SETOF integer LANGUAGE sql STABLE SECURITY DEFINER "
    "SET search_path = public, pg_temp AS $$ SELECT team FROM memberships WHERE member = session_user $$",
    "CREATE FUNCTION is_member(t integer) RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER "
    "SET search_path = '' AS $$ SELECT EXISTS (SELECT 1 FROM public.memberships m "
    "WHERE m.member = session_user AND m.team = t) $$",
    "CREATE TABLE documents (id integer, team integer, title text)",
    "INSERT INTO documents VALUES (1, 1, 'plan'), (2, 2, 'secret')",
    "ALTER TABLE documents ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY documents_of_members ON documents USING (is_member(team))",
    f"REVOKE SELECT ON memberships FROM {READER}",
    # ... and one whose `$user` is a schema of its owner's, where names resolve otherwise for the reader.
    f"CREATE SCHEMA {WRITER}",
    f"CREATE VIEW {WRITER}.memberships AS SELECT ender()::text AS member, 1 AS team",
    "CREATE FUNCTION public.users_teams() RETURNS SETOF integer LANGUAGE sql STABLE SECURITY DEFINER "
    'SET search_path = "$user", public AS $$ SELECT team FROM memberships $$',
)


def _superuser_setup(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        "CREATE EXTENSION pgcrypto",
        'CREATE EXTENSION "uuid-ossp"',
        *loopback_server(server, name),
        "CREATE FOREIGN TABLE foreign_child () INHERITS (foreign_parent) SERVER loopback "
        "OPTIONS (table_name 'ending_view')",
        "CREATE FOREIGN TABLE foreign_partition PARTITION OF partitioned DEFAULT SERVER loopback "
        "OPTIONS (table_name 'ending_view')",
        f"GRANT SELECT ON foreign_child, foreign_partition, ending_view TO {READER}",
    )


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _superuser_setup) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT * FROM partly_indexed WHERE id = 1", id="index-predicate-folded"),
        pytest.param("SELECT count(*) FROM expression_indexed", id="index-expression-folded"),
        pytest.param("SELECT * FROM parent WHERE ended", id="child-check-constraint-folded"),
        pytest.param("SELECT * FROM foreign_parent", id="foreign-inheritance-child"),
        pytest.param("SELECT * FROM partitioned", id="foreign-partition"),
        pytest.param("EXPLAIN DECLARE c CURSOR FOR SELECT folded_ender()", id="explain-declare"),
    ],
)
async def test_a_read_that_ends_sessions_asks(pg: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(pg, victims, sql)


async def test_the_dry_run_of_a_write_reading_such_a_table_does_not_end_sessions(
    pg: PgDatabase, victims: Victims
) -> None:
    """The dry run runs as the writer: planning there folds the index predicate of a table the write reads."""
    (impact,) = await pg.previews("INSERT INTO plain SELECT id, v FROM partly_indexed")

    assert ended(victims) == []
    assert "no dry run" in impact.lines[0]
    assert pg.rows("SELECT count(*) FROM plain") == [(0,)]


async def test_explain_declare_of_a_harmless_query_is_a_read(pg: PgDatabase) -> None:
    (harmless,) = await pg.classifications("EXPLAIN DECLARE c CURSOR FOR SELECT 1")

    assert harmless.read_only
    database = pg.open()
    try:
        result = await database.read(harmless)
    finally:
        await database.aclose()
    assert "Result" in str(result.rows[0][0])


async def test_row_security_through_a_security_definer_helper_with_its_own_search_path_is_a_read(
    pg: PgDatabase,
) -> None:
    """Such helpers name relations; where the reader and the owner resolve names alike (each schema of the
    helper's search path usable by both or by neither), they are judged by their bodies."""
    statements = ("SELECT title FROM documents", "SELECT * FROM my_teams()", "SELECT is_member(2)")
    classifications = await pg.classifications(*statements)

    assert [str(change) for classification in classifications for change in classification.changes] == []
    database = pg.open()
    try:
        results = [(await database.read(classification)).rows for classification in classifications]
    finally:
        await database.aclose()
    assert results == [(("plan",),), ((1,),), ((False,),)]


async def test_a_security_definer_helper_whose_user_schema_differs_still_asks(pg: PgDatabase, victims: Victims) -> None:
    (classification,) = await pg.classifications("SELECT * FROM users_teams()")

    assert not classification.read_only
    assert "SECURITY DEFINER" in str(classification.changes[0].detail)
    assert ended(victims) == []


async def test_random_values_from_common_extensions_are_read(pg: PgDatabase) -> None:
    """pgcrypto and uuid-ossp install volatile functions that only draw random numbers."""
    sql = "SELECT gen_random_uuid() IS NOT NULL, uuid_generate_v4() IS NOT NULL, length(gen_random_bytes(4))"
    (classification,) = await pg.classifications(sql)

    assert [str(change) for change in classification.changes] == []
    database = pg.open()
    try:
        assert (await database.read(classification)).rows == ((True, True, 4),)
    finally:
        await database.aclose()
