"""Red team: a declined data change filled the disk.

Before anyone is asked, a data change gets a dry run that is rolled back, to count the rows it would change. A
rollback gives back no disk: `INSERT INTO t SELECT ... FROM generate_series(1, 3000000)` wrote for the whole preview
time limit, about 1 GB of dead rows in the table's file and as much WAL, on every call, declined or not. A dry run
is now made only when the planner expects it to write little; past that the question shows the planner's estimate,
which an approval is not held to.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types import ElicitRequestFormParams

from safedb import wording
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase, database_with
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

_WIDE_ROWS = 40_000
_SETUP = (
    "CREATE TABLE sink (id integer, payload text)",
    # Rows of about 1 kB (too short for TOAST to compress): some 45 MB in all, each UPDATE or DELETE of all of them
    # writes about as much. VACUUM ANALYZE counts them, as autovacuum would have by the time an agent comes.
    "CREATE TABLE wide (id integer PRIMARY KEY, payload text)",
    f"INSERT INTO wide SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, {_WIDE_ROWS}) AS g",
    "VACUUM ANALYZE wide",
)
# A million narrow rows: some 70 MB by the planner's estimate; the dry run wrote it in a second or two.
_LARGE_INSERT = "INSERT INTO sink SELECT g, md5(g::text) FROM generate_series(1, 1000000) AS g"
_TOO_MUCH = "more than a dry run may write before anyone approves the statement"
_SETTLE_SECONDS = 10.0


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, _SETUP) as database:
        yield database


def _footprint(pg: PgDatabase, table: str) -> tuple[int, int, int]:
    """What has been written to `table`: its file's size, the rows inserted, updated and deleted in it (committed or
    not), and its dead rows. Read once every other session of the database has ended: a session reports its counts
    to the statistics before it ends."""
    with pg.server.connect(pg.name) as connection:
        deadline = time.monotonic() + _SETTLE_SECONDS
        while connection.execute(
            b"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "other sessions of the test database did not end"
            time.sleep(0.05)
        row = connection.execute(
            b"SELECT pg_relation_size(relid), n_tup_ins + n_tup_upd + n_tup_del, n_dead_tup "
            b"FROM pg_stat_user_tables WHERE relid = %s::regclass",
            (table,),
        ).fetchone()
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]))


async def test_a_declined_large_insert_writes_nothing(pg: PgDatabase, tmp_path: Path) -> None:
    before = _footprint(pg, "sink")
    responder = Responder(action="decline")
    result, decisions = await pg.call_execute_query(_LARGE_INSERT, tmp_path / "audit.db", responder)
    assert _footprint(pg, "sink") == before
    assert "declined" in str(result.structured_content)
    assert decisions == ["requested", "declined"]
    (question,) = responder.asked
    assert isinstance(question, ElicitRequestFormParams)
    assert f"about {wording.rows(1_000_000)} would be affected (insert), by the planner's estimate; no dry run (" in (
        question.message
    )
    assert _TOO_MUCH in question.message
    # No count was made, so the approval is held to none.
    assert "An approval does not hold this statement to a number of rows" in question.message


@pytest.mark.parametrize(
    ("sql", "verbs"),
    [
        # The plan carries only the changed column; the rows written are whole.
        ("UPDATE wide SET id = -id", "update"),
        ("DELETE FROM wide", "delete"),
        # The data change in a WITH sits below the query that counts its rows.
        ("WITH gone AS (DELETE FROM wide RETURNING id) SELECT count(*) FROM gone", "delete"),
    ],
)
async def test_a_large_update_or_delete_gets_the_estimate_and_writes_nothing(
    pg: PgDatabase, sql: str, verbs: str
) -> None:
    before = _footprint(pg, "wide")
    _, impact = await pg.asked(sql)
    assert _footprint(pg, "wide") == before
    assert impact.rows_affected is None
    line = impact.lines[0]
    assert line.startswith(
        f"about {wording.rows(_WIDE_ROWS)} would be affected ({verbs}), by the planner's estimate; "
        "no dry run (it would write about "
    ), line
    assert _TOO_MUCH in line


@pytest.mark.parametrize(
    ("sql", "rows", "verbs", "table"),
    [
        ("INSERT INTO sink VALUES (1, 'one'), (2, 'two')", 2, "insert", "sink"),
        ("DELETE FROM wide WHERE id <= 3", 3, "delete", "wide"),
        ("UPDATE wide SET payload = 'short' WHERE id BETWEEN 10 AND 14", 5, "update", "wide"),
    ],
)
async def test_a_small_change_still_gets_its_dry_run_count(
    pg: PgDatabase, sql: str, rows: int, verbs: str, table: str
) -> None:
    _, impact = await pg.asked(sql)
    assert impact.rows_affected == rows
    assert impact.lines[0] == (
        f"{wording.rows(rows)} would be affected ({verbs}), measured by a dry run that was rolled back."
    )
    assert pg.rows(f"SELECT count(*) FROM {table} WHERE payload IN ('one', 'two', 'short')") == [(0,)]


async def test_explain_analyze_of_a_change_gets_no_dry_run(pg: PgDatabase) -> None:
    """EXPLAIN ANALYZE runs the statement, and PostgreSQL cannot EXPLAIN an EXPLAIN to say how much it would write;
    its dry run counted nothing either (the rows it returns are the plan's lines)."""
    before = _footprint(pg, "wide")
    _, impact = await pg.asked("EXPLAIN ANALYZE UPDATE wide SET id = -id")
    assert _footprint(pg, "wide") == before
    assert impact.rows_affected is None
    assert impact.lines[0].startswith("no dry run and no planner's estimate (update; EXPLAIN ANALYZE")
