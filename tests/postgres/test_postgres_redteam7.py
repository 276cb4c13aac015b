"""Red team, seventh pass (2026-11-28): the comparison functions of operator classes that are not their type's
default, which PostgreSQL runs of its own accord.

- A partition key's class sorts the partitions' bounds when a session first plans the table: `SELECT * FROM
  parted` ran it, unasked (SafeDB counted only the default classes of the types a statement meets).
- A range type's subtype class compares the bounds of every value of it built: `SELECT '[1,5)'::spans` ran it.
- `max(most_common_vals) FROM pg_stats` compares sampled values of an analysed column's type with that type's
  default class, of which SafeDB knew nothing: the column is typed `anyarray`.
- An index's class compares each row an INSERT writes, and a partition key's routes it: the dry run made before
  anyone answered ran the class's function, so a declined INSERT still moved a sequence.

(A shadowed built-in in SafeDB's own catalog queries, found in the same pass: test_postgres_shadowing.py.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import ENDER, PgDatabase, Victims, assert_asks_without_ending, database_with
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    ENDER,
    "CREATE SEQUENCE compared",
    # Compares as integers do, and counts each comparison; `ending_cmp` ends other sessions too.
    "CREATE FUNCTION counted_cmp(a integer, b integer) RETURNS integer LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('compared'); RETURN btint4cmp(a, b); END $$",
    "CREATE FUNCTION ending_cmp(a integer, b integer) RETURNS integer LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM ender(); RETURN btint4cmp(a, b); END $$",
    # A type whose default class compares with a function labelled immutable that ends sessions.
    "CREATE TYPE grade AS (g integer)",
    "CREATE FUNCTION grade_cmp(a grade, b grade) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM ender(); RETURN btint4cmp(a.g, b.g); END $$",
    "CREATE FUNCTION grade_lt(grade, grade) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1.g < $2.g'",
    "CREATE OPERATOR < (LEFTARG = grade, RIGHTARG = grade, FUNCTION = grade_lt)",
    "CREATE TABLE graded (x grade)",
    "INSERT INTO graded SELECT ROW(g % 7)::grade FROM generate_series(1, 1000) AS g",
    # (No `=` in these statements: the integer classes below hold integers' own, which counts their functions.)
    "CREATE VIEW sampled AS SELECT max(most_common_vals)::text AS top FROM pg_stats WHERE tablename LIKE 'graded'",
)


def _superuser_setup(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        "CREATE OPERATOR CLASS counted_ops FOR TYPE integer USING btree AS OPERATOR 1 <, OPERATOR 2 <=, "
        "OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 counted_cmp(integer, integer)",
        "CREATE OPERATOR CLASS grade_ops DEFAULT FOR TYPE grade USING btree AS OPERATOR 1 <, "
        "FUNCTION 1 grade_cmp(grade, grade)",
        "ANALYZE graded",
        "CREATE OPERATOR CLASS ending_ops FOR TYPE integer USING btree AS OPERATOR 1 <, OPERATOR 2 <=, "
        "OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 ending_cmp(integer, integer)",
        # Owned by the writer, as the application's own tables and types are.
        "SET ROLE safedb_writer",
        "CREATE TABLE indexed (id integer)",
        "CREATE INDEX indexed_counted ON indexed (id counted_ops)",
        "CREATE TABLE routed (v integer) PARTITION BY RANGE (v counted_ops)",
        "CREATE TABLE routed_low PARTITION OF routed FOR VALUES FROM (0) TO (100)",
        "CREATE TABLE routed_high PARTITION OF routed FOR VALUES FROM (100) TO (200)",
        "CREATE TABLE parted (v integer) PARTITION BY RANGE (v ending_ops)",
        "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100)",
        "CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (100) TO (200)",
        "CREATE TYPE spans AS RANGE (subtype = integer, subtype_opclass = ending_ops)",
        "CREATE TABLE spanned (s spans)",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}",
        "RESET ROLE",
    )


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _superuser_setup) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT * FROM parted", id="partition-key-class"),
        pytest.param("SELECT * FROM parted_low", id="partition-key-class-of-a-parent"),
        pytest.param("SELECT '[1,5)'::spans", id="range-subtype-class"),
        pytest.param("SELECT * FROM spanned ORDER BY s", id="range-subtype-class-of-a-column"),
        pytest.param(
            "SELECT max(most_common_vals) FROM pg_stats WHERE tablename LIKE 'graded'", id="statistics-sampled-values"
        ),
        pytest.param("SELECT top FROM sampled", id="statistics-in-a-view"),
    ],
)
async def test_a_read_that_runs_a_classes_comparison_asks(pg: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(pg, victims, sql)


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("INSERT INTO indexed VALUES (25)", id="index-class"),
        pytest.param("INSERT INTO routed VALUES (150)", id="partition-key-class"),
    ],
)
async def test_no_dry_run_runs_a_classes_comparison(pg: PgDatabase, sql: str) -> None:
    before = pg.rows("SELECT last_value, is_called FROM compared")

    (preview,) = await pg.previews(sql)

    assert pg.rows("SELECT last_value, is_called FROM compared") == before
    assert "no dry run" in " ".join(preview.lines), preview.lines
    assert "counted_cmp" in " ".join(preview.lines), preview.lines
