"""The SQLite audit file taken away from a running server: nothing runs without a record someone can read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.audit import AuditDecision, AuditQuery, AuditWriteFailed, SqliteAuditStore, verify
from tests.audit.helpers import event
from tests.helpers import Responder, rows, safedb_serve

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def test_a_server_whose_audit_file_was_deleted_runs_no_change(demo_db: Path) -> None:
    audit_path = demo_db.parent / "audit.db"
    with safedb_serve(demo_db) as server:
        async with Client(server.url, elicitation_callback=Responder()) as client:
            first = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 4"})
            assert not first.is_error, first.content
            for suffix in ("", "-wal", "-shm"):
                os.unlink(f"{audit_path}{suffix}")
            second = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 5"})
            read = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM invoices"})
    assert second.is_error
    assert "was deleted or replaced while this server had it open" in second.content[0].text  # type: ignore[union-attr]
    assert "Nothing was run" in second.content[0].text  # type: ignore[union-attr]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 5") == [(1,)]
    assert not read.is_error
    assert not audit_path.exists()  # nothing was written to a file of that name after all


def test_a_log_renamed_over_by_an_older_copy_takes_no_more_records(audit_path: Path) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        store.append(event(AuditDecision.REQUESTED, 1))
        older = audit_path.with_name("older.db")
        shutil.copy(audit_path, older)  # no -wal yet: the writer holds it; the copy lacks record 1
        store.append(event(AuditDecision.ACCEPTED, 1))
        os.replace(older, audit_path)
        with pytest.raises(AuditWriteFailed, match="deleted or replaced"):
            store.append(event(AuditDecision.ACCEPTED, 2))
    with SqliteAuditStore.open(audit_path, readonly=True) as reader:
        assert verify(reader).intact


# Run in a process of its own: SQLite's memory limit is the process's, and can only be lowered.
_APPEND_PAST_THE_MEMORY_LIMIT = """
import sqlite3, sys
from dataclasses import replace
from pathlib import Path
from safedb.audit import AuditDecision, AuditQuery, AuditWriteFailed, SqliteAuditStore, verify
from tests.audit.helpers import event
with SqliteAuditStore.open(Path(sys.argv[1])) as store:
    store.append(event(AuditDecision.REQUESTED, 1))
    sqlite3.connect(":memory:").execute("PRAGMA hard_heap_limit = 4000000")
    try:
        store.append(replace(event(AuditDecision.REQUESTED, 2), sql="SELECT '" + "x" * 8_000_000 + "'"))
    except AuditWriteFailed as exc:
        print(exc)
    store.append(event(AuditDecision.REQUESTED, 3))
    print("intact" if verify(store).intact else "not intact")
"""


def test_an_append_past_sqlites_memory_limit_is_a_failure_to_write(audit_path: Path) -> None:
    """SQLite's memory limit is the process's: the served database's statements may fill it. Python's sqlite3 then
    raises MemoryError, which went past the store's handling of failures, unrecorded and unexplained."""
    ran = subprocess.run(
        [sys.executable, "-c", _APPEND_PAST_THE_MEMORY_LIMIT, str(audit_path)],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["The audit log could not be written (out of memory).", "intact"], ran.stdout


async def test_an_audit_log_whose_path_is_not_utf8_is_written_and_verified(demo_db: Path) -> None:
    """A path is bytes to the system: opening the log at one that is not UTF-8 text (a directory named in Latin-1)
    ended `safedb serve` in a traceback, decoding the name SQLite gave back for it."""
    audit_path = demo_db.parent / os.fsdecode(b"journal-\xe9t\xe9.db")
    with safedb_serve(demo_db, env={"SAFEDB_AUDIT_DB": str(audit_path)}) as server:
        async with Client(server.url, elicitation_callback=Responder()) as client:
            result = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 4"})
    assert not result.is_error, result.content
    assert f"audit log: {demo_db.parent}/journal-\\udce9t\\udce9.db\n" in server.log
    with SqliteAuditStore.open(audit_path, readonly=True) as store:
        assert verify(store).intact
        decisions = [str(record.decision) for record in store.records(AuditQuery())]
    assert decisions == ["requested", "accepted", "executed"]
