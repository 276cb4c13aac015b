"""`safedb serve --database postgresql://... --writer-database postgresql://...` as a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.audit import AuditQuery, open_audit_store
from tests.helpers import Responder, serving_process
from tests.postgres.conftest import PgDatabase
from tests.postgres_server import WRITER

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_serve_postgres_url_reads_and_runs_an_approved_write(pg: PgDatabase, tmp_path: Path, mode: str) -> None:
    command = [
        sys.executable, "-m", "safedb", "serve", "--port", "0",
        "--database", pg.reader_url(), "--writer-database", pg.writer_url(), "--audit-db", str(tmp_path / "audit.db"),
    ]  # fmt: skip
    pg.rows("DELETE FROM notes WHERE id = 70")
    responder = Responder()
    with serving_process(command) as server:
        assert pg.reader_url() not in "".join(server.log)  # the password stays out of the log
        async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
            read = await client.call_tool("execute_query", {"query": "SELECT count(*) AS n FROM accounts"})
            write = await client.call_tool("execute_query", {"query": "INSERT INTO notes VALUES (70, 'from serve')"})
    assert read.structured_content is not None
    assert read.structured_content["rows"] == [[3]]
    assert not write.is_error, write.content
    assert len(responder.asked) == 1
    assert pg.rows("SELECT body FROM notes WHERE id = 70") == [("from serve",)]


async def test_audit_log_in_a_postgres_schema(pg: PgDatabase, tmp_path: Path) -> None:
    """--audit-db postgresql://...: decisions land in the dedicated schema, and `safedb audit verify` agrees."""
    audit_url = pg.writer_url()
    command = [
        sys.executable, "-m", "safedb", "serve", "--port", "0",
        "--database", pg.reader_url(), "--writer-database", pg.writer_url(), "--audit-db", audit_url,
    ]  # fmt: skip
    query = "DELETE FROM notes WHERE id = 71"
    with serving_process(command) as server:
        async with Client(server.url, elicitation_callback=Responder(action="decline")) as client:
            result = await client.call_tool("execute_query", {"query": query})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    # The banner says where decisions go, without the password the URL holds.
    banner = [line for line in server.log if line.startswith("audit log: ")]
    assert banner == [f"audit log: postgresql {WRITER}@127.0.0.1:{pg.server.port}/{pg.name}, schema safedb_audit\n"]
    with open_audit_store(audit_url, readonly=True) as store:
        decisions = [(str(r.decision), r.sql) for r in store.records(AuditQuery())]
    assert decisions[-2:] == [("requested", query), ("declined", query)]
    verified = subprocess.run(
        [sys.executable, "-m", "safedb", "audit", "verify", "--audit-db", audit_url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_unreachable_postgres_is_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", "--database", "postgresql://nobody:secret@127.0.0.1:1/none",
         "--audit-db", str(tmp_path / "audit.db")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Cannot connect to PostgreSQL" in result.stderr
    assert "secret" not in result.stderr
    assert "Traceback" not in result.stderr
