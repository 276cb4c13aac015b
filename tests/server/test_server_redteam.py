"""Red team of the tool call's life: what the audit log says when a call ends at an awkward moment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult

from safedb.audit import AuditQuery
from safedb.db.backend import QueryLimits
from tests.helpers import Responder, in_process_server, rows

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
