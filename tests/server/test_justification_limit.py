"""How long a justification may be: found by red-teaming the protocol. A client that answered with a justification
of two megabytes had it stored whole in the audit log, on every call it answered; the approval page took any
length too. Real clients over HTTP against `safedb serve`, and posts to the page; the log is read from its file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.approval.verification import JUSTIFICATION_MAX_CHARS
from safedb.audit import AuditQuery, SqliteAuditStore
from tests.helpers import Responder, ServerProcess, rows, scratch_table
from tests.web.test_approval_page import audit_records, link_token, post, serving_prod, waiting_call
from tests.web.test_web_redteam import basic, csrf_of

pytestmark = pytest.mark.anyio


def answer(justification: str) -> Responder:
    return Responder(content={"confirm": True, "justification": justification, "environment": "Development"})


async def test_the_question_says_how_long_a_justification_may_be(own_server: tuple[ServerProcess, Path]) -> None:
    server, database = own_server
    table = scratch_table(database)
    responder = Responder(action="decline")
    async with Client(server.url, mode="legacy", elicitation_callback=responder) as client:
        await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    (question,) = responder.asked
    schema = question.model_dump(by_alias=True)["requestedSchema"]
    assert schema["properties"]["justification"]["maxLength"] == JUSTIFICATION_MAX_CHARS


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_overlong_justification_runs_nothing_and_is_not_stored(
    own_server: tuple[ServerProcess, Path], mode: str
) -> None:
    server, database = own_server
    table = scratch_table(database)
    overlong = "because " * 250_000  # two megabytes
    async with Client(server.url, mode=mode, elicitation_callback=answer(overlong)) as client:
        result = await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    assert result.is_error
    assert f"at most {JUSTIFICATION_MAX_CHARS:,} characters" in str(result.content)
    assert rows(database, f"SELECT count(*) FROM {table}") == [(3,)]
    with SqliteAuditStore.open(database.parent / "audit.db", readonly=True) as audit:
        records = list(audit.records(AuditQuery(limit=None)))
    assert [record.decision for record in records] == ["requested", "refused"]
    assert all(record.justification is None for record in records)


async def test_a_justification_of_the_longest_length_approves(own_server: tuple[ServerProcess, Path]) -> None:
    server, database = own_server
    table = scratch_table(database)
    longest = "x" * JUSTIFICATION_MAX_CHARS
    async with Client(server.url, mode="auto", elicitation_callback=answer(longest)) as client:
        result = await client.call_tool("execute_query", {"query": f"DELETE FROM {table}"})
    assert not result.is_error, result.content
    assert rows(database, f"SELECT count(*) FROM {table}") == [(0,)]


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_the_approval_page_refuses_an_overlong_justification(tmp_path: Path, decision: str) -> None:
    with serving_prod(tmp_path, approvers=("alice",)) as (server, database, audit):
        async with waiting_call(server.url, "legacy") as (responder, results):
            link = responder.urls[0]
            fields = {
                "t": link_token(link), "csrf": csrf_of(link, basic("alice")), "decision": decision,
                "justification": "y" * (JUSTIFICATION_MAX_CHARS + 1),
            }  # fmt: skip
            refused = post(link, fields, {"Authorization": basic("alice")})
            assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
            fields["justification"] = "not needed after all"
            assert post(link, {**fields, "decision": "reject"}, {"Authorization": basic("alice")}) == 200
    assert refused == 400
    assert results[0].structured_content is not None
    assert results[0].structured_content["status"] == "declined"
    assert audit_records(audit) == [("requested", None), ("declined", "alice: not needed after all")]
