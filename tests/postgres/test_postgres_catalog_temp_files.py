"""SafeDB's catalog queries write no temporary files: a server that forbids them (`temp_file_limit = 0`) still
has its statements classified, and a DBA logging temporary files (`log_temp_files`) sees none from SafeDB.

The query for the code a statement runs followed the types it reaches with a join that PostgreSQL planned for
its guess of a recursive query's size: every round read every type in the catalog and spilled to temporary
files (three files, some 77 kB, for each classification of a DELETE)."""

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
