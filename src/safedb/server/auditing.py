"""The audit records of one tool call, and who made the call."""

from __future__ import annotations

import uuid
from typing import Any

from mcp.server.mcpserver import Context

from safedb.audit import AuditDecision, AuditEvent, AuditStore
from safedb.sql.classification import Classification


def describe_caller(ctx: Context[Any, Any]) -> str:
    """The client as it introduced itself (name and version), plus its session when there is one."""
    params = ctx.session.client_params
    name = f"{params.client_info.name} {params.client_info.version}" if params is not None else "unnamed client"
    session_id = (ctx.headers or {}).get("mcp-session-id")
    return f"{name} (session {session_id})" if session_id else name


class CallAudit:
    """Writes the audit records of one `execute_query` call, all linked by one request id.

    Recording is part of the decision: when a record cannot be written the store raises and the
    statement does not run.
    """

    def __init__(self, store: AuditStore, target: str, caller: str, sql: str) -> None:
        self._store = store
        self._target = target
        self._caller = caller
        self._sql = sql
        self.request_id = uuid.uuid4().hex
        self._classification: Classification | None = None

    def classified(self, classification: Classification) -> None:
        self._classification = classification

    async def asking(self, request_id: str) -> None:
        """The question is about to go out under `request_id`: record that it was requested."""
        self.request_id = request_id
        await self.record(AuditDecision.REQUESTED)

    async def record(self, decision: AuditDecision, **fields: Any) -> None:
        if self._classification is None:
            event = AuditEvent(decision, self.request_id, self._target, self._sql, caller=self._caller)
        else:
            event = AuditEvent.about(
                decision, self._classification, request_id=self.request_id, target=self._target, caller=self._caller
            )
        await self._store.record(event.followed_by(decision, **fields) if fields else event)
