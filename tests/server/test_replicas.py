"""Two server processes sharing the request-state keys and the audit log: a 2026-07-28 round started on
one finishes on the other, and its answer still counts once."""

from __future__ import annotations

import secrets
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult, InputRequiredResult

from tests.helpers import Responder, rows, safedb_serve

pytestmark = pytest.mark.anyio

ACCEPT = ElicitResult(action="accept", content={"confirm": True, "justification": "test", "environment": "Development"})
QUERY = "DELETE FROM invoices WHERE id = 4"


async def test_round_started_on_one_process_finishes_on_another_once(demo_db: Path) -> None:
    key = secrets.token_urlsafe(48)
    shared = ("--request-state-key", key)
    with safedb_serve(demo_db, *shared) as first, safedb_serve(demo_db, *shared) as second:
        async with Client(first.url, elicitation_callback=Responder()) as on_first:
            asked = await on_first.session.call_tool("execute_query", {"query": QUERY}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key_name,) = asked.input_requests
        async with Client(second.url, elicitation_callback=Responder()) as on_second:
            answered = await on_second.session.call_tool(
                "execute_query", {"query": QUERY}, input_responses={key_name: ACCEPT}, request_state=asked.request_state
            )
        assert not answered.is_error, answered.content
        assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 4") == [(0,)]
        with closing(sqlite3.connect(demo_db)) as connection, connection:
            connection.execute("INSERT INTO invoices VALUES (4, 3, 250000, 'draft', '2025-07-19')")
        async with Client(first.url, elicitation_callback=Responder()) as replaying:
            replayed = await replaying.session.call_tool(
                "execute_query", {"query": QUERY}, input_responses={key_name: ACCEPT}, request_state=asked.request_state
            )
    assert replayed.is_error
    assert "already answered" in replayed.content[0].text  # type: ignore[union-attr]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 4") == [(1,)]


async def test_without_shared_keys_another_process_rejects_the_round(demo_db: Path) -> None:
    with safedb_serve(demo_db) as first, safedb_serve(demo_db) as second:
        async with Client(first.url, elicitation_callback=Responder()) as on_first:
            asked = await on_first.session.call_tool("execute_query", {"query": QUERY}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key_name,) = asked.input_requests
        async with Client(second.url, elicitation_callback=Responder()) as on_second:
            with pytest.raises(Exception, match="requestState"):
                await on_second.session.call_tool(
                    "execute_query", {"query": QUERY}, input_responses={key_name: ACCEPT},
                    request_state=asked.request_state,
                )  # fmt: skip
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 4") == [(1,)]
