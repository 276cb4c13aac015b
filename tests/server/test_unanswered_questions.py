"""2026-07-28 questions no one comes back to are recorded as timed out. Found by the red team: a client that never
retried left the log saying only `requested`, for good (the handshake era records `timed_out`).

A real MCP client (the SDK's, speaking 2026-07-28) against SafeDB in this process; the audit log and the database
are read as they are on disk.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import ElicitRequestURLParams, ElicitResult, InputRequiredResult

from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.settings import Policy
from tests.helpers import Responder, in_process_server, rows
from tests.web.test_approval_page import QUERY as PROD_QUERY
from tests.web.test_approval_page import UrlResponder, approve_by_post, serving_prod

pytestmark = pytest.mark.anyio

TIMEOUT = 1.0
QUERY = "DELETE FROM t WHERE id = 2"
ACCEPT = ElicitResult(action="accept", content={"confirm": True, "justification": "test", "environment": "Development"})


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3);")
    return path


def decisions(audit: SqliteAuditStore, request_id: str) -> list[str]:
    return [str(record.decision) for record in audit.records(AuditQuery(request_id=request_id))]


async def until_decided(audit: SqliteAuditStore, request_id: str) -> list[str]:
    """The request's decisions once it has more than its question (or after 10 s)."""
    with anyio.move_on_after(10):
        while len(decisions(audit, request_id)) < 2:
            await anyio.sleep(0.1)
    return decisions(audit, request_id)


async def test_a_question_never_answered_is_recorded_as_timed_out(database: Path) -> None:
    async with (
        in_process_server(database, Policy(approval_timeout=TIMEOUT)) as (server, audit),
        Client(server, mode="auto", elicitation_callback=Responder()) as client,
    ):
        asked = await client.session.call_tool("execute_query", {"query": QUERY}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        (requested,) = audit.records(AuditQuery(limit=None))

        assert await until_decided(audit, requested.request_id) == ["requested", "timed_out"]
        (timed_out,) = audit.records(AuditQuery(request_id=requested.request_id, limit=1))
        assert timed_out.sql == QUERY
        assert "never returned" in (timed_out.error or "")
        assert rows(database, "SELECT count(*) FROM t") == [(3,)]

        assert asked.input_requests is not None
        (key,) = asked.input_requests
        late = await client.session.call_tool(
            "execute_query", {"query": QUERY}, input_responses={key: ACCEPT}, request_state=asked.request_state
        )
    assert late.is_error
    assert "No answer came in time" in late.content[0].text  # type: ignore[union-attr]
    assert "already answered" not in late.content[0].text  # type: ignore[union-attr]
    assert decisions(audit, requested.request_id) == ["requested", "timed_out"]
    assert rows(database, "SELECT count(*) FROM t") == [(3,)]


async def test_a_question_answered_in_time_is_not_also_recorded_as_timed_out(database: Path) -> None:
    async with (
        in_process_server(database, Policy(approval_timeout=TIMEOUT)) as (server, audit),
        Client(server, mode="auto", elicitation_callback=Responder()) as client,
    ):
        result = await client.call_tool("execute_query", {"query": QUERY})
        assert not result.is_error, result.content
        (requested,) = [record for record in audit.records(AuditQuery(limit=None)) if record.decision == "requested"]
        await anyio.sleep(TIMEOUT + 1.5)  # past the question's expiry, and the watch's check of it
        recorded = decisions(audit, requested.request_id)
    assert recorded == ["requested", "accepted", "executed"]
    assert rows(database, "SELECT id FROM t") == [(1,), (3,)]


async def test_an_approval_on_the_page_that_no_client_came_back_for_is_recorded(tmp_path: Path) -> None:
    """The approver approved on the page, and the client never retried: the log says who approved, and that the
    statement never ran."""
    with serving_prod(tmp_path, approval_timeout=2) as (server, database, audit_path):
        async with Client(server.url, mode="auto", elicitation_callback=UrlResponder()) as client:
            asked = await client.session.call_tool(
                "execute_query", {"query": PROD_QUERY, "target": "prod"}, allow_input_required=True
            )
            assert isinstance(asked, InputRequiredResult)
            assert asked.input_requests is not None
            ((_, request),) = asked.input_requests.items()
            assert isinstance(request.params, ElicitRequestURLParams)
            assert approve_by_post(request.params.url, "Removing voided invoice per OPS-42") == 200
            with SqliteAuditStore.open(audit_path, readonly=True) as audit:
                (requested,) = audit.records(AuditQuery(limit=None))
                recorded = await until_decided(audit, requested.request_id)
                (timed_out,) = audit.records(AuditQuery(request_id=requested.request_id, limit=1))
    assert recorded == ["requested", "timed_out"]
    assert "On the approval page, alice had approved it (Removing voided invoice per OPS-42)" in (timed_out.error or "")
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
