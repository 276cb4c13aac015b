"""Every session SafeDB opens, as the reader or as the writer, reads statements as the checks read them:
names resolve through the reader's search path, and string literals as SafeDB's parser reads them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import WRITER, PostgresServer

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


async def test_a_name_means_the_same_table_to_the_checks_the_dry_run_and_the_approved_run(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        classification = await database.classify("DELETE FROM t WHERE id <= 2")
        impact = await database.preview(classification)
        await database.write(classification, impact.rows_affected)
    finally:
        await database.aclose()

    assert impact.rows_affected == 2
    assert pg.rows("SELECT id FROM public.t ORDER BY id") == [(3,), (4,), (5,)]
    assert pg.rows(f'SELECT count(*) FROM "{WRITER}".t') == [(50,)]


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
