"""Every session SafeDB opens, as the reader or as the writer, reads statements as the checks read them:
names resolve through the reader's search path, and string literals as SafeDB's parser reads them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from safedb.db.backend import Bounds
from safedb.errors import DatabaseOpenError
from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import READER, WRITER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE TABLE t (id integer PRIMARY KEY, v text)",
    "INSERT INTO t SELECT n, 'public' FROM generate_series(1, 5) AS n",
    # A schema named after the writer: first on the writer's default search path ("$user", public), not on
    # the reader's (it has no schema of its name), so `t` would mean another table to each of them.
    f'CREATE SCHEMA "{WRITER}"',
    f'CREATE TABLE "{WRITER}".t (id serial PRIMARY KEY, v text)',
    f"INSERT INTO \"{WRITER}\".t (v) SELECT 'shadow' FROM generate_series(1, 50)",
)


@pytest.fixture
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


async def delete_the_first_two_rows_of_t(pg: PgDatabase) -> None:
    """Classify, preview and run `DELETE FROM t WHERE id <= 2`; both the count and the rows must be public.t's."""
    database = pg.open()
    try:
        classification = await database.classify("DELETE FROM t WHERE id <= 2")
        impact = await database.preview(classification)
        await database.write(classification, Bounds(rows=impact.rows_affected))
    finally:
        await database.aclose()

    assert impact.rows_affected == 2
    assert pg.rows("SELECT id FROM public.t ORDER BY id") == [(3,), (4,), (5,)]


async def test_a_name_means_the_same_table_to_the_checks_the_dry_run_and_the_approved_run(pg: PgDatabase) -> None:
    await delete_the_first_two_rows_of_t(pg)

    assert pg.rows(f'SELECT count(*) FROM "{WRITER}".t') == [(50,)]


async def test_a_schema_the_reader_may_not_use_is_not_searched_by_the_writer_either(pg: PgDatabase) -> None:
    """A schema named after the reader that the reader may not use: PostgreSQL leaves it out of the reader's
    search path, and the writer, searching "safedb_reader", public, would find a table there first."""
    pg.run_as_owner(
        f'CREATE SCHEMA "{READER}"',
        f'CREATE TABLE "{READER}".t (id integer, v text)',
        f"INSERT INTO \"{READER}\".t VALUES (1, 'hidden'), (2, 'hidden')",
    )
    await delete_the_first_two_rows_of_t(pg)

    assert pg.rows(f'SELECT count(*) FROM "{READER}".t') == [(2,)]


async def test_a_writer_that_cannot_use_a_schema_the_reader_searches_is_refused(pg: PgDatabase) -> None:
    pg.run_as_owner("CREATE SCHEMA extra", f"GRANT USAGE ON SCHEMA extra TO {READER}")
    pg.rows(f"ALTER ROLE {READER} IN DATABASE {pg.name} SET search_path = extra, public")
    pg.rows("ALTER SCHEMA extra OWNER TO postgres")  # the writer, its owner until now, loses USAGE
    database = pg.open()
    try:
        with pytest.raises(DatabaseOpenError, match="Grant the writer USAGE"):
            await database.list_tables()
    finally:
        await database.aclose()


async def test_string_literals_read_as_the_parser_reads_them_on_a_server_set_to_the_legacy_escapes(
    pg: PgDatabase,
) -> None:
    """With `standard_conforming_strings = off`, `'x\\'' , f() --'` is one string to SafeDB's parser but a call
    of f() to such a server. SafeDB's sessions read a backslash as the parser does, reader and writer alike."""
    pg.rows(f"ALTER DATABASE {pg.name} SET standard_conforming_strings = off")
    database = pg.open()
    try:
        read = await database.read(await database.classify("SELECT 'a\\' AS text"))
        approved = await database.write(
            await database.classify("SELECT set_config('application_name', 'x', false), 'b\\' AS text")
        )
    finally:
        await database.aclose()

    assert read.rows == (("a\\",),)
    assert approved.returned is not None
    assert approved.returned.rows == (("x", "b\\"),)
