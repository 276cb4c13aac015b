"""`safedb serve` on PostgreSQL when sessions end under it: the server restarts, or an administrator ends
SafeDB's sessions (`pg_terminate_backend`), between the question and the answer. Both protocol eras.

These tests restart their own PostgreSQL server, apart from the one the rest of the suite shares.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from tests.conftest_postgres import fresh_database
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase
from tests.postgres.test_postgres_e2e_changes import MODES, decisions, safedb_on, text
from tests.postgres_server import PostgresServer, PostgresUnavailable, postgres_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PgDatabase]:
    try:
        with postgres_server() as server:
            name = fresh_database(server, ("CREATE TABLE items (id integer PRIMARY KEY, label text)",))
            yield PgDatabase(server, name)
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


class OutageResponder(Responder):
    """Accepts, after `outage()` (as the person decides)."""

    def __init__(self, outage: Any) -> None:
        super().__init__()
        self.outage = outage

    async def __call__(self, context: Any, params: Any) -> Any:
        if not self.asked:
            self.outage()
        return await super().__call__(context, params)


def end_safedb_sessions(server: PostgresServer, database: str) -> None:
    with server.connect(database) as admin:
        admin.execute(
            b"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            b"WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


OUTAGES = ["restart", "terminate"]


def outage_of(pg: PgDatabase, kind: str) -> Any:
    return pg.server.restart if kind == "restart" else lambda: end_safedb_sessions(pg.server, pg.name)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", OUTAGES)
@pytest.mark.parametrize("audit_in", ["sqlite", "postgres"])
async def test_an_approved_change_after_sessions_ended_runs_and_is_recorded(
    own_pg: PgDatabase, tmp_path: Path, mode: str, kind: str, audit_in: str
) -> None:
    """SafeDB's pooled sessions (and the audit log's, when it is in PostgreSQL) ended while the person decided:
    they are replaced, not handed to the approved run, the records, or the next read to fail on."""
    pg = own_pg
    row = OUTAGES.index(kind) * 10 + MODES.index(mode) * 2 + ["sqlite", "postgres"].index(audit_in)
    sql = f"INSERT INTO items VALUES ({row}, 'approved')"
    audit_db = str(tmp_path / "audit.db") if audit_in == "sqlite" else pg.writer_url()
    responder = OutageResponder(outage_of(pg, kind))
    with safedb_on(pg, audit_db) as server:
        async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
            result = await client.call_tool("execute_query", {"query": sql})
            after = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM items"})
        log = "".join(server.log)
    assert "Traceback" not in log, log
    assert not result.is_error, text(result)
    assert not after.is_error, text(after)
    assert pg.rows(f"SELECT label FROM items WHERE id = {row}") == [("approved",)]
    assert decisions(audit_db, sql)[-2:] == ["accepted", "executed"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_down_when_the_answer_comes_is_a_clear_error_and_nothing_runs(
    own_pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """The database server (which also holds the audit log) is down when the answer arrives: the call ends in a
    clear error, not an unexpected one with a traceback, and nothing runs."""
    pg = own_pg
    row = 100 + MODES.index(mode)
    sql = f"INSERT INTO items VALUES ({row}, 'approved')"
    responder = OutageResponder(pg.server.stop)
    try:
        with safedb_on(pg, pg.writer_url()) as server:
            async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
                result = await client.call_tool("execute_query", {"query": sql})
            log = "".join(server.log)
    finally:
        pg.server.restart()
    assert result.is_error
    assert "Error executing tool" not in text(result)
    assert "Traceback" not in log, log
    assert "could not be written" in text(result) or "Cannot connect" in text(result), text(result)
    assert pg.rows(f"SELECT count(*) FROM items WHERE id = {row}") == [(0,)]
    assert decisions(pg.writer_url(), sql) == ["requested"]


def waiting_writer(server: PostgresServer, database: str) -> int | None:
    """The pid of a session of the writer role waiting for a lock, if there is one."""
    with server.connect(database) as admin:
        row = admin.execute(
            b"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND usename = 'safedb_writer' "
            b"AND wait_event_type = 'Lock'"
        ).fetchone()
    return None if row is None else int(str(row[0]))


@pytest.mark.parametrize("mode", MODES)
async def test_an_approved_run_waiting_on_a_lock_ended_by_an_administrator_changes_nothing(
    own_pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """Another session holds the table while the approved run waits for it; other clients are served meanwhile;
    an administrator ends the waiting session: a clear error, nothing changed, `failed` in the audit log."""
    pg = own_pg
    row = 200 + MODES.index(mode)
    sql = f"INSERT INTO items VALUES ({row}, 'approved')"
    audit_db = str(tmp_path / "audit.db")
    holder = pg.server.connect(pg.name)
    responder = OutageResponder(lambda: holder.execute(b"BEGIN; LOCK TABLE items IN ACCESS EXCLUSIVE MODE"))
    ended: list[int] = []
    try:
        with safedb_on(pg, audit_db) as server:

            async def end_the_waiting_writer() -> None:
                with anyio.fail_after(30):
                    while (pid := waiting_writer(pg.server, pg.name)) is None:
                        await anyio.sleep(0.05)
                # The server still answers other clients while this call waits.
                async with Client(server.url, mode=mode) as other:
                    read = await other.call_tool("execute_query", {"query": "SELECT 41 + 1 AS n"})
                assert read.structured_content is not None
                assert read.structured_content["rows"] == [[42]]
                with pg.server.connect(pg.name) as admin:
                    admin.execute(b"SELECT pg_terminate_backend(%s)", (pid,))
                ended.append(pid)

            async with anyio.create_task_group() as group:
                group.start_soon(end_the_waiting_writer)
                async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
                    result = await client.call_tool("execute_query", {"query": sql})
            log = "".join(server.log)
    finally:
        holder.close()
    assert ended
    assert result.is_error
    assert "terminating connection" in text(result), text(result)
    assert "Traceback" not in log, log
    assert pg.rows(f"SELECT count(*) FROM items WHERE id = {row}") == [(0,)]
    assert decisions(audit_db, sql) == ["requested", "accepted", "failed"]
