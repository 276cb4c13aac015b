"""SafeDB's catalog queries write no temporary files: a server that forbids them (`temp_file_limit = 0`) still
has its statements classified, and a DBA logging temporary files (`log_temp_files`) sees none from SafeDB.

The query for the code a statement runs followed the types it reaches with a join that PostgreSQL planned for
its guess of a recursive query's size: every round read every type in the catalog and spilled to temporary
files (three files, some 77 kB, for each classification of a DELETE). In a larger catalog, the function query
hashed what the recursive queries reach into 131,072 batches, in temporary files, for a guess of billions of
rows; the catalog queries now join by nested loops only (`catalog.CATALOG_SETTINGS`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import SETUP, PgDatabase, database_with
from tests.postgres_server import READER, PostgresServer

pytestmark = pytest.mark.anyio


def _no_temporary_files(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (f"ALTER ROLE {READER} IN DATABASE {name} SET temp_file_limit = 0",)


@pytest.fixture(scope="module")
def pg_strict(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _no_temporary_files) as database:
        yield database


# 1,500 tables of 20 columns, and 300 domains and composite types: some 4,000 types in all.
LARGER_CATALOG = (
    *SETUP,
    "DO $$ BEGIN FOR i IN 1..1500 LOOP EXECUTE format('CREATE TABLE wide%s (id integer PRIMARY KEY, %s)', i, "
    "(SELECT string_agg(format('c%s text', j), ', ') FROM generate_series(1, 20) AS j)); END LOOP; END $$",
    "DO $$ BEGIN FOR i IN 1..300 LOOP EXECUTE format('CREATE DOMAIN positive%s AS integer CHECK (VALUE > 0)', i); "
    "EXECUTE format('CREATE TYPE pair%s AS (a integer, b text)', i); END LOOP; END $$",
)


@pytest.fixture(scope="module")
def pg_strict_and_larger(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, LARGER_CATALOG, _no_temporary_files) as database:
        yield database


@pytest.mark.parametrize(
    ("sql", "read_only"),
    [
        ("SELECT * FROM wide7 WHERE id = 1", True),
        ("SELECT double_it(id) FROM wide9", True),
        ("SELECT * FROM calm_notes", True),
        ("DELETE FROM wide3 WHERE id = 1", False),
    ],
)
async def test_a_statement_is_classified_in_a_larger_catalog_where_temporary_files_are_forbidden(
    pg_strict_and_larger: PgDatabase, sql: str, read_only: bool
) -> None:
    (classification,) = await pg_strict_and_larger.classifications(sql)
    assert classification.read_only is read_only


@pytest.mark.parametrize(
    ("sql", "read_only"),
    [
        ("DELETE FROM notes WHERE id = 1", False),
        ("UPDATE accounts SET balance = balance + 1", False),
        ("INSERT INTO accounts (owner) VALUES ('new')", False),
        ("SELECT double_it(id) FROM accounts", True),
        ("SELECT * FROM calm_notes", True),
        ("SELECT * FROM calm_over_loud", False),  # the view under it calls a volatile function
    ],
)
async def test_a_statement_is_classified_where_temporary_files_are_forbidden(
    pg_strict: PgDatabase, sql: str, read_only: bool
) -> None:
    (classification,) = await pg_strict.classifications(sql)
    assert classification.statement == sql
    assert classification.read_only is read_only
