"""URL-mode elicitation: the question goes to an approver on SafeDB's approval page, in both eras.

Handshake era: the server sends a URL-mode `elicitation/create`; once the client consents to open it,
the call waits for the approver's decision, then sends `notifications/elicitation/complete`.
2026-07-28: the tool returns an `InputRequiredResult` carrying the URL and a ticket; each retry waits a
little for the decision and, while it is still pending, hands the same question back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import REQUEST_TIMEOUT, ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from safedb.approval.binding import ApprovalTicket
from safedb.approval.board import ApprovalBoard, BoardVerdict, WebApproval
from safedb.approval.verification import Answer, SafetyVerification, approver_justification
from safedb.db.backend import Impact
from safedb.errors import ApprovalHeldElsewhere
from safedb.server.elicitation import APPROVAL_KEY, Reply, progress_while_waiting, uses_input_required
from safedb.sql.classification import Classification

logger = logging.getLogger(__name__)

# How long one 2026-07-28 retry waits for the approver before handing the question back.
RETRY_WAIT = 20.0


@dataclass(frozen=True)
class WebQuestion:
    target: str
    environment: str
    impact: Impact
    caller: str
    timeout: float
    min_justification: int


def approval_page_served(ctx: Context[Any, Any]) -> bool:
    """Whether this call came over HTTP, where SafeDB serves the approval page; over stdio no page is served."""
    return getattr(ctx.request_context.request, "url", None) is not None


def client_can_open_urls(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


class WebApprovalChannel:
    """Sends approvals to the approval page and waits for the approver's decision."""

    def __init__(self, board: ApprovalBoard, public_url: str | None, keepalive: float = 10.0) -> None:
        self.board = board
        self._public_url = public_url
        self._keepalive = keepalive

    async def ask(
        self,
        ctx: Context[Any, Any],
        classification: Classification,
        question: WebQuestion,
        asking: Callable[[str], Awaitable[None]],
    ) -> Reply | InputRequiredResult:
        """The approver's decision as a `Reply`, or (2026-07-28) the question to hand back to the client."""
        if uses_input_required(ctx):
            return await self._ask_input_required(ctx, classification, question, asking)
        _, approval = self._open(classification, question)
        try:
            return await self._elicit_and_wait(ctx, approval, asking)
        finally:
            # Declined or cancelled at the client, or the call itself cancelled: nothing waits for a decision.
            self.board.withdraw(approval)

    async def _elicit_and_wait(
        self, ctx: Context[Any, Any], approval: WebApproval, asking: Callable[[str], Awaitable[None]]
    ) -> Reply:
        """Handshake era: send the link, and wait for the approver's decision once the client consents."""
        await asking(approval.id)
        params = ElicitRequestURLParams(
            message=_message(approval), url=self._link(ctx, approval), elicitation_id=approval.id
        )
        try:
            # The client's consent, too, must come while the approval holds: unanswered, it is a timeout.
            consent = await ctx.session.send_request(
                ElicitRequest(params=params),
                ElicitResult,
                request_read_timeout_seconds=max(approval.expires - time.time(), 0),
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return Reply(Answer.TIMEOUT, None, approval.id)
            logger.info("URL elicitation failed on the client side, treated as cancelled: %s", exc)
            return Reply(Answer.CANCEL, None, approval.id)
        if consent.action != "accept":
            return Reply(Answer.DECLINE if consent.action == "decline" else Answer.CANCEL, None, approval.id)
        with anyio.move_on_after(max(approval.expires - time.time(), 0)):
            async with progress_while_waiting(ctx, self._keepalive, "Waiting for an approver"):
                await approval.decided.wait()
        await ctx.session.send_elicit_complete(approval.id, related_request_id=ctx.request_id)
        if approval.expired:  # a consent that came late: an approval given in time expires with its question
            return Reply(Answer.TIMEOUT, None, approval.id)
        return _reply(approval)

    async def _ask_input_required(
        self,
        ctx: Context[Any, Any],
        classification: Classification,
        question: WebQuestion,
        asking: Callable[[str], Awaitable[None]],
    ) -> Reply | InputRequiredResult:
        response = (ctx.input_responses or {}).get(APPROVAL_KEY)
        ticket = ApprovalTicket.decode(ctx.request_state)
        if isinstance(response, ElicitResult) and ticket is not None and ticket.covers(classification, question.caller):
            approval = self.board.get(ticket.id)
            if ticket.expired:  # an approval given in time expires with its question all the same
                return Reply(Answer.TIMEOUT, None, ticket.id)
            if response.action != "accept":
                if approval is not None:
                    self.board.withdraw(approval)
                answer = Answer.DECLINE if response.action == "decline" else Answer.CANCEL
                return Reply(answer, None, ticket.id)
            if approval is None:  # the client accepted, but the approver's decision is another process's to give
                raise ApprovalHeldElsewhere
            with anyio.move_on_after(min(RETRY_WAIT, max(approval.expires - time.time(), 0))):
                await approval.decided.wait()
            if approval.verdict is BoardVerdict.PENDING and not approval.expired:
                return self._question(ctx, approval, ticket)
            return _reply(approval)
        ticket, approval = self._open(classification, question)
        try:
            await asking(approval.id)
        except BaseException:
            self.board.withdraw(approval)  # never asked (its record failed): nothing will come back for it
            raise
        return self._question(ctx, approval, ticket)

    def _open(self, classification: Classification, question: WebQuestion) -> tuple[ApprovalTicket, WebApproval]:
        """A new question: its ticket, and its approval on the board (under the ticket's id)."""
        ticket = ApprovalTicket.issue(classification, question.timeout, question.caller, question.impact.bounds)
        approval = self.board.open(
            ticket.id,
            target=question.target,
            environment=question.environment,
            classification=classification,
            impact=question.impact,
            caller=question.caller,
            timeout=question.timeout,
            min_justification=question.min_justification,
        )
        return ticket, approval

    def _question(self, ctx: Context[Any, Any], approval: WebApproval, ticket: ApprovalTicket) -> InputRequiredResult:
        params = ElicitRequestURLParams(message=_message(approval), url=self._link(ctx, approval))
        return InputRequiredResult(
            input_requests={APPROVAL_KEY: ElicitRequest(params=params)}, request_state=ticket.encode()
        )

    def _link(self, ctx: Context[Any, Any], approval: WebApproval) -> str:
        base = self._public_url
        if base is None:
            request = ctx.request_context.request
            url = getattr(request, "url", None)
            base = f"{url.scheme}://{url.netloc}" if url is not None else "http://127.0.0.1"
        return f"{base.rstrip('/')}/approvals/{approval.id}?t={approval.link_token}"


def _message(approval: WebApproval) -> str:
    return (
        f"SafeDB needs an approver to review this change to {approval.target} ({approval.environment}) on the "
        f"approval page: {approval.classification.summary}. Open the link to review and decide."
    )


def _reply(approval: WebApproval) -> Reply:
    if approval.verdict is BoardVerdict.APPROVED:
        return Reply(Answer.ACCEPT, _decided(approval, True), approval.id, approval.impact.bounds)
    if approval.verdict is BoardVerdict.REJECTED:
        # Declined all the same; the answer is kept so that the audit log says who rejected it, and why.
        return Reply(Answer.DECLINE, _decided(approval, False), approval.id)
    return Reply(Answer.TIMEOUT, None, approval.id)


def _decided(approval: WebApproval, confirm: bool) -> SafetyVerification:
    """The approver's decision as an answer (`approver_justification`; the page keeps it within the form's limit)."""
    return SafetyVerification(
        confirm=confirm,
        justification=approver_justification(str(approval.approver), approval.justification or ""),
        environment=approval.environment.capitalize(),  # type: ignore[arg-type]
    )
