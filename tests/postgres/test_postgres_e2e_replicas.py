"""Two `safedb serve` processes on one PostgreSQL database, sharing the request-state key and an audit log in a
PostgreSQL schema: a 2026-07-28 round asked by one is answered at the other, once; a process with the key but a
log of its own refuses it."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult, InputRequiredResult

from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase
from tests.postgres.test_postgres_e2e_changes import decisions, safedb_on, text

pytestmark = pytest.mark.anyio

ACCEPT = ElicitResult(action="accept", content={"confirm": True, "justification": "test", "environment": "Development"})


async def test_a_round_asked_by_one_process_is_answered_at_another_once(pg: PgDatabase, tmp_path: Path) -> None:
    pg.run_as_owner("CREATE TABLE shared_rounds (id integer PRIMARY KEY)", "INSERT INTO shared_rounds VALUES (1)")
    sql = "DELETE FROM shared_rounds WHERE id = 1"
    shared = ("--request-state-key", secrets.token_urlsafe(48))
    audit_db = pg.writer_url()
    with safedb_on(pg, audit_db, *shared) as first, safedb_on(pg, audit_db, *shared) as second:
        async with Client(first.url, elicitation_callback=Responder()) as on_first:
            asked = await on_first.session.call_tool("execute_query", {"query": sql}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key,) = asked.input_requests
        answer = {"input_responses": {key: ACCEPT}, "request_state": asked.request_state}
        with safedb_on(pg, str(tmp_path / "own-audit.db"), *shared) as stranger:
            async with Client(stranger.url, elicitation_callback=Responder()) as on_stranger:
                refused = await on_stranger.session.call_tool("execute_query", {"query": sql}, **answer)
        assert refused.is_error
        assert pg.rows("SELECT count(*) FROM shared_rounds") == [(1,)]
        async with Client(second.url, elicitation_callback=Responder()) as on_second:
            answered = await on_second.session.call_tool("execute_query", {"query": sql}, **answer)
        assert not answered.is_error, text(answered)
        assert pg.rows("SELECT count(*) FROM shared_rounds") == [(0,)]
        pg.run_as_owner("INSERT INTO shared_rounds VALUES (1)")
        async with Client(first.url, elicitation_callback=Responder()) as replaying:
            replayed = await replaying.session.call_tool("execute_query", {"query": sql}, **answer)
    assert replayed.is_error
    assert "already answered" in text(replayed)
    assert pg.rows("SELECT count(*) FROM shared_rounds") == [(1,)]
    assert decisions(audit_db, sql) == ["requested", "accepted", "executed", "refused"]
