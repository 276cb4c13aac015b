"""DROP OWNED BY reads like "drop a role" but drops every object the role owns: its question lists them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import WRITER, PostgresServer

pytestmark = pytest.mark.anyio

# A role that owns nothing, of which the writer is a member (DROP OWNED BY needs that).
IDLE_ROLE = f"idle_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster)
    database = PgDatabase(postgres_cluster, name)
    database.run_as_owner(
        "CREATE TABLE orders (id integer PRIMARY KEY, total integer)",
        "INSERT INTO orders SELECT n, n FROM generate_series(1, 50) AS n",
        "CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 10",
        "CREATE FUNCTION double_it(v integer) RETURNS integer LANGUAGE sql AS 'SELECT v * 2'",
    )
    with postgres_cluster.connect() as admin:
        admin.execute(f"CREATE ROLE {IDLE_ROLE}".encode())
        admin.execute(f"GRANT {IDLE_ROLE} TO {WRITER}".encode())
    yield database
    postgres_cluster.drop_database(name)
    with postgres_cluster.connect() as admin:
        admin.execute(f"DROP ROLE {IDLE_ROLE}".encode())


@pytest.mark.parametrize("role", [WRITER, "CURRENT_USER", "SESSION_USER"])
async def test_the_question_lists_everything_drop_owned_would_drop(pg: PgDatabase, role: str) -> None:
    (impact,) = await pg.previews(f"DROP OWNED BY {role}")

    (line,) = impact.lines
    assert line.startswith(f"DROP OWNED BY {WRITER} drops everything it owns in this database")
    assert "1 table (orders)" in line
    assert "1 view (big_orders)" in line
    assert "1 function (double_it(integer))" in line
    assert pg.rows("SELECT count(*) FROM orders") == [(50,)]  # the preview only looked


async def test_a_role_that_owns_nothing_is_said_to(pg: PgDatabase) -> None:
    (impact,) = await pg.previews(f"DROP OWNED BY {IDLE_ROLE}")

    assert impact.lines == (
        f"DROP OWNED BY {IDLE_ROLE}: it owns nothing in this database; only its privileges are revoked.",
    )
