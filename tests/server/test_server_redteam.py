"""Red team of the tool call's life: what the audit log says when a call ends at an awkward moment."""

from __future__ import annotations

import contextlib
import gc
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitResult

from safedb.approval.display import visible_statement
from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.db.backend import QueryLimits
from tests.helpers import Responder, in_process_server, rows, watching_the_loop
from tests.web.test_approval_page import prod_config

pytestmark = pytest.mark.anyio

# An approved change that takes a second or two: its WHERE counts to fifteen million first. Its preview (a dry run,
# under a 0.2 s limit here) does not finish, so the approval binds no row count.
SLOW_UPDATE = (
    "UPDATE invoices SET amount_cents = amount_cents + 1 WHERE id = 1 AND (WITH RECURSIVE c(x) AS "
    "(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 15000000) SELECT count(*) FROM c) > 0"
)


async def test_a_call_cancelled_while_its_approved_change_runs_records_how_it_ended(demo_db: Path) -> None:
    """The client gives up on the call (`notifications/cancelled`) after the person approved, while the statement
    runs. The run was interrupted where it stood and nothing recorded how it ended: the log said `accepted` and no
    more, as after a crash ("may or may not have run"). Now the change runs to its end and its outcome is recorded."""
    answered = anyio.Event()
    approve = Responder()

    async def approving(context: Any, params: Any) -> ElicitResult:
        result = await approve(context, params)
        answered.set()
        return result

    before = rows(demo_db, "SELECT amount_cents FROM invoices WHERE id = 1")[0][0]
    async with (
        in_process_server(demo_db, limits=QueryLimits(preview_timeout=0.2)) as (server, audit),
        Client(server, mode="legacy", elicitation_callback=approving) as client,
    ):
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "execute_query", {"query": SLOW_UPDATE})
            with anyio.fail_after(20):
                await answered.wait()
            await anyio.sleep(0.4)  # the approved statement is running now
            group.cancel_scope.cancel()
        with anyio.fail_after(30):
            while len(records := list(audit.records(AuditQuery()))) < 3:
                await anyio.sleep(0.05)
    assert [str(r.decision) for r in records] == ["requested", "accepted", "executed"]
    assert records[2].rows_affected == 1
    assert rows(demo_db, "SELECT amount_cents FROM invoices WHERE id = 1") == [(before + 1,)]


async def test_over_stdio_a_target_approved_on_the_web_page_refuses_changes_plainly(tmp_path: Path) -> None:
    """The approval page is served on SafeDB's HTTP server, which a stdio server does not run: the question went out
    with a link to http://127.0.0.1/approvals/... (port 80, where nothing listens), and a person who opened it found
    nothing, while the call waited for the whole approval timeout. Changes are refused at once, saying why."""
    config, database, audit_db = prod_config(tmp_path)
    asked = Responder(action="accept", content=None)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "safedb", "serve", "--config", str(config), "--transport", "stdio"],
        env={**os.environ, "SAFEDB_DATA_DIR": str(tmp_path / "home")},
    )
    async with Client(params, mode="legacy", elicitation_callback=asked) as client:
        with anyio.fail_after(30):
            read = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM invoices"})
            change = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 7"})
    assert not read.is_error
    assert change.is_error
    assert change.structured_content is not None
    assert change.structured_content["status"] == "refused"
    assert "HTTP" in change.structured_content["message"]
    assert asked.asked == []
    assert rows(database, "SELECT count(*) FROM invoices WHERE id = 7") == [(1,)]
    with SqliteAuditStore.open(audit_db, readonly=True) as audit:
        assert [str(record.decision) for record in audit.records(AuditQuery())] == ["refused"]


@pytest.mark.parametrize("hidden", ["e\u0301", "\u200b\u200c"], ids=["combining-marks", "zero-width"])
async def test_a_long_statement_of_hidden_characters_does_not_hold_up_the_event_loop(
    tmp_path: Path, hidden: str
) -> None:
    """Showing a statement's hidden characters looks at each of them: for 980,000 characters that are not ASCII,
    0.8 s on the event loop for every call that asked about one (red team, 2026-11-28). A long one is shown from a
    worker thread now, whole."""
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    statement = "DELETE FROM t WHERE name = '" + hidden * 490_000 + "'"
    responder = Responder(action="decline")

    async def ask() -> object:
        async with in_process_server(path) as (server, _), Client(server, elicitation_callback=responder) as client:
            return await client.call_tool("execute_query", {"query": statement})

    # As `safedb serve` does once it has started (app.serve): the test process's own heap, which grows with the
    # suite, would otherwise add its full collections' pauses to the server's.
    gc.collect()
    gc.freeze()
    try:
        _, longest = await watching_the_loop(ask)
    finally:
        gc.unfreeze()

    assert longest < 0.3, f"the event loop was held up for {longest:.2f} s"
    (question,) = responder.asked
    assert visible_statement(statement) in question.message
