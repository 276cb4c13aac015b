"""Every decision the server takes about a change lands in the audit log, in order, linked by request id."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult

from safedb.audit import AuditQuery, SqliteAuditStore, verify
from safedb.server.auditing import CallAudit
from safedb.settings import Policy
from tests.helpers import Responder, in_process_server, rows

pytestmark = pytest.mark.anyio

DELETE_ONE = "DELETE FROM invoices WHERE id = 1"


async def run(path: Path, query: str, responder: Any, mode: str = "auto", **settings: Any) -> list[Any]:
    async with in_process_server(path, **settings) as (server, audit):
        async with Client(server, mode=mode, elicitation_callback=responder) as client:
            await client.call_tool("execute_query", {"query": query})
        records = list(audit.records(AuditQuery()))
        assert verify(audit).intact
    return records


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    ("answer", "decisions"),
    [
        ({}, ["requested", "accepted", "executed"]),
        ({"action": "decline"}, ["requested", "declined"]),
        ({"action": "cancel"}, ["requested", "cancelled"]),
        (
            {"content": {"confirm": False, "justification": "no", "environment": "Development"}},
            ["requested", "not_confirmed"],
        ),
        (
            {"content": {"confirm": True, "justification": "short", "environment": "Production"}},
            ["requested", "blocked"],
        ),
    ],
    ids=["executed", "declined", "cancelled", "not-confirmed", "blocked"],
)
async def test_decisions_are_recorded(demo_db: Path, mode: str, answer: dict[str, Any], decisions: list[str]) -> None:
    records = await run(demo_db, DELETE_ONE, Responder(**answer), mode)
    assert [str(r.decision) for r in records] == decisions
    assert {r.request_id for r in records} == {records[0].request_id}
    assert all(r.sql == DELETE_ONE and r.classification == "data change (delete)" for r in records)
    assert records[0].caller == "mcp 0.1.0"  # the SDK client's default name and version
    if decisions[-1] == "executed":
        assert records[-1].rows_affected == 1
        assert records[1].justification == "cleanup of test rows"
        assert records[1].environment == "Development"


async def test_timed_out_is_recorded(demo_db: Path) -> None:
    async def never(context: Any, params: Any) -> ElicitResult:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    records = await run(demo_db, DELETE_ONE, never, "legacy", policy=Policy(approval_timeout=1))
    assert [str(r.decision) for r in records] == ["requested", "timed_out"]


async def test_a_call_cancelled_while_its_question_waits_is_recorded(demo_db: Path) -> None:
    """The client gives up on the call (`notifications/cancelled`) while the person is still deciding."""
    asked = anyio.Event()

    async def undecided(context: Any, params: Any) -> ElicitResult:
        asked.set()
        await anyio.sleep(60)
        raise AssertionError("unreachable")

    async with (
        in_process_server(demo_db) as (server, audit),
        Client(server, mode="legacy", elicitation_callback=undecided) as client,
    ):
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "execute_query", {"query": DELETE_ONE})
            with anyio.fail_after(10):
                await asked.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while len(records := list(audit.records(AuditQuery()))) < 2:
                await anyio.sleep(0.05)
    assert [str(r.decision) for r in records] == ["requested", "cancelled"]
    assert "cancelled while its question waited" in (records[1].error or "")
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 1") == [(1,)]


async def test_recording_a_cancelled_call_does_not_wait_for_a_busy_log(tmp_path: Path) -> None:
    """Another connection holds the audit log's write lock (SafeDB waits up to 30 s for it): the cancelled call
    still ends after the few seconds `abandoned` allows, so a stopping server does not hang on its waiting calls."""
    store = SqliteAuditStore.open(tmp_path / "audit.db")
    audit = CallAudit(store, "test", lambda: "client", DELETE_ONE)
    await audit.asking("question-1")
    other = sqlite3.connect(tmp_path / "audit.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    ended = anyio.Event()

    async def waiting_call() -> None:
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            await audit.abandoned()
            raise
        finally:
            ended.set()

    try:
        with anyio.fail_after(15):  # well short of the log's 30 s busy timeout
            async with anyio.create_task_group() as group:
                group.start_soon(waiting_call)
                await anyio.sleep(0.2)
                group.cancel_scope.cancel()
            await ended.wait()
    finally:
        other.execute("ROLLBACK")
        other.close()
        store.close()


async def test_failed_execution_is_recorded_with_the_error(demo_db: Path) -> None:
    query = "INSERT INTO users (id, name, email, created_at) VALUES (1, 'Dup', 'dup@example.com', '2026-01-01')"
    records = await run(demo_db, query, Responder())
    assert [str(r.decision) for r in records] == ["requested", "accepted", "failed"]
    assert "UNIQUE constraint failed" in (records[-1].error or "")


@pytest.mark.parametrize(
    ("query", "responder", "decision"),
    [
        ("SELECT 1; DELETE FROM invoices", Responder(), "refused"),
        ("BEGIN", Responder(), "refused"),
        ("SELECT load_extension('x')", Responder(), "blocked"),
        (DELETE_ONE, None, "refused"),
    ],
    ids=["multiple-statements", "transaction-control", "deny-list", "no-elicitation-capability"],
)
async def test_refusals_are_recorded(demo_db: Path, query: str, responder: Responder | None, decision: str) -> None:
    records = await run(demo_db, query, responder)
    assert [str(r.decision) for r in records] == [decision]
    assert records[0].error


async def test_reads_are_not_decisions(demo_db: Path) -> None:
    assert await run(demo_db, "SELECT * FROM users", Responder()) == []
