"""The audit records of one tool call, and who made the call."""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context

from safedb.audit import AnswerCheck, AuditDecision, AuditEvent, AuditStore, AuditWriteFailed, QuestionNotRecorded
from safedb.errors import ApprovalReused
from safedb.server.elicitation import uses_input_required
from safedb.sql.classification import Classification

logger = logging.getLogger(__name__)

ABANDONED = "The call was cancelled while its question waited (the client gave up, or the server stopped)."

CALLER_CHARACTERS = 200
"""Characters of a client's name and version kept in the audit log."""

# Seconds a cancelled call may take to record that it was cancelled before it ends anyway.
_ABANDON_RECORD_SECONDS = 5.0


def describe_caller(ctx: Context[Any, Any]) -> str:
    """The client as it introduced itself (name and version, cut short past `CALLER_CHARACTERS`: it is on every
    record of the call), plus its session when there is one."""
    params = ctx.session.client_params
    name = f"{params.client_info.name} {params.client_info.version}" if params is not None else "unnamed client"
    if len(name) > CALLER_CHARACTERS:
        name = f"{name[:CALLER_CHARACTERS]}... ({len(name):,} characters)"
    # 2026-07-28 has no sessions: a session id there is whatever the request's header says, which nothing checks.
    session_id = None if uses_input_required(ctx) else (ctx.headers or {}).get("mcp-session-id")
    return f"{name} (session {session_id})" if session_id else name


class CallAudit:
    """Writes the audit records of one `execute_query` call, all linked by one request id.

    Recording is part of the decision: when a record cannot be written the store raises and the
    statement does not run. The log also makes each answer count once (see `record_answer`).
    """

    def __init__(self, store: AuditStore, target: str, describe: Callable[[], str], sql: str) -> None:
        self._store = store
        self._target = target
        self._describe = describe
        self._sql = sql
        self._classification: Classification | None = None
        self._asked = False

    # Made on first use: most calls are reads, which write no record and ask no one.
    @functools.cached_property
    def caller(self) -> str:
        return self._describe()

    @functools.cached_property
    def request_id(self) -> str:
        return uuid.uuid4().hex

    @property
    def asked(self) -> bool:
        """Whether this call put a question (and recorded it as requested)."""
        return self._asked

    def classified(self, classification: Classification) -> None:
        self._classification = classification

    async def asking(self, request_id: str) -> None:
        """The question is about to go out under `request_id`: record that it was requested."""
        self.request_id = request_id
        await self.record(AuditDecision.REQUESTED)
        self._asked = True

    async def abandoned(self) -> None:
        """This call was cancelled while waiting for the answer to a question it put: record the question as
        cancelled, unless it was answered meanwhile. Shielded from the cancellation, and bounded."""
        if not self._asked:
            return
        # One line for the operator (as when the question fails at the client), not a traceback: a client that
        # gives up or goes away while a person decides is an expected event.
        logger.info(ABANDONED)
        with anyio.move_on_after(_ABANDON_RECORD_SECONDS, shield=True):
            with contextlib.suppress(ApprovalReused, AuditWriteFailed, QuestionNotRecorded):
                await self.record_answer(AuditDecision.CANCELLED, error=ABANDONED)

    async def record(self, decision: AuditDecision, **fields: Any) -> None:
        await self._store.record(self._event(decision, fields))

    async def record_answer(self, decision: AuditDecision, **fields: Any) -> None:
        """Record the answer to the question; an answer the log already holds is a replay and is refused, and so
        is one to a question the log does not hold.

        Raises:
            ApprovalReused: the question was already answered (here or in another process sharing the log).
            QuestionNotRecorded: the log does not hold the question (another server, keeping another log,
                asked it).
        """
        await self._record_answer(decision, AnswerCheck.ASKED, fields)

    async def record_unasked(self, decision: AuditDecision, **fields: Any) -> None:
        """Record a decision about a change that no one was asked about (the policy lets it run unasked), synced to
        the disk like an answer."""
        await self._record_answer(decision, AnswerCheck.UNASKED, fields)

    async def _record_answer(self, decision: AuditDecision, check: AnswerCheck, fields: dict[str, Any]) -> None:
        if await self._store.record_answer(self._event(decision, fields), check) is None:
            raise ApprovalReused

    def _event(self, decision: AuditDecision, fields: dict[str, Any]) -> AuditEvent:
        if self._classification is None:
            event = AuditEvent(decision, self.request_id, self._target, self._sql, caller=self.caller)
        else:
            event = AuditEvent.about(
                decision, self._classification, request_id=self.request_id, target=self._target, caller=self.caller
            )
        return event.followed_by(decision, **fields) if fields else event
