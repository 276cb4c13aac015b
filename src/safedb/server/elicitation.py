"""Asking the person at the client, in whichever protocol era the request speaks.

Handshake era (2025-06-18, 2025-11-25): the server sends `elicitation/create` in the middle of the
tool call and waits for the answer. 2026-07-28: the tool returns an `InputRequiredResult` with the
question and a ticket in `requestState` (sealed by the SDK); the client retries the call with the
answer, and the ticket binds that answer to this statement, once.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import anyio
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import REQUEST_TIMEOUT, ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least
from pydantic import ValidationError

from safedb.approval.binding import ApprovalTicket
from safedb.approval.verification import Answer, SafetyVerification
from safedb.db.backend import UNBOUND, Bounds
from safedb.sql.classification import Classification

logger = logging.getLogger(__name__)

APPROVAL_KEY = "safedb_approval"
_INPUT_REQUIRED_VERSION = "2026-07-28"


@functools.cache
def _form_params(form: type[SafetyVerification]) -> ElicitRequestFormParams:
    return ElicitRequestFormParams(message="", requested_schema=render_elicitation_schema(form))


def _elicit_request(text: str, form: type[SafetyVerification]) -> ElicitRequest:
    """The form question with `text`. Its schema is validated once per form and shared: validating it for
    every question would copy it into each of the thousands that may wait at once."""
    return ElicitRequest.model_construct(params=_form_params(form).model_copy(update={"message": text}))


@dataclass(frozen=True, slots=True)
class Reply:
    answer: Answer
    verification: SafetyVerification | None
    """The validated form; None when cancelled, when the content did not fit the form, or when declined at the
    client (a rejection on the approval page keeps the approver's name and justification, for the audit log)."""
    request_id: str
    """Links the question and its answer (the ticket id on 2026-07-28)."""
    bounds: Bounds = UNBOUND
    """What the question showed of its impact preview, which an approval holds the statement to."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """The question's text, and what it shows of the impact preview, which an approval holds the statement to."""

    text: str
    bounds: Bounds = UNBOUND


@dataclass(frozen=True, slots=True)
class Question:
    """What the channel needs from the caller: the prompt, built only when asked, and a hook run just
    before the question goes out (the server records it in the audit log there)."""

    prompt: Callable[[], Awaitable[Prompt]]
    asking: Callable[[str], Awaitable[None]]
    """Called with the request id before the question is sent; if it raises, nothing is asked."""
    caller: str = ""
    """Who is asked; a 2026-07-28 answer counts only from the same client."""
    form: type[SafetyVerification] = SafetyVerification
    timeout: float = 600.0
    """Seconds to wait for the person; unanswered by then, the question counts as cancelled."""


def client_can_elicit(ctx: Context[Any, Any]) -> bool:
    """True when the client declared form elicitation (a bare `elicitation: {}` means form)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def uses_input_required(ctx: Context[Any, Any]) -> bool:
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, _INPUT_REQUIRED_VERSION)


def progress_while_waiting(ctx: Context[Any, Any], every: float, message: str) -> AbstractAsyncContextManager[None]:
    """Progress notifications (`message` and the seconds waited, every `every` seconds) while the body
    waits for a person, if the client asked for progress (a progress token). Without one, nothing: a
    question may wait for a long time, and thousands may wait at once."""
    if (ctx.request_context.meta or {}).get("progress_token") is None:
        return _NO_PROGRESS
    return _reporting_progress(ctx, every, message)


_NO_PROGRESS: AbstractAsyncContextManager[None] = nullcontext()
"""Shared by every question that reports no progress (`nullcontext` keeps no state): thousands may wait at once."""


@asynccontextmanager
async def _reporting_progress(ctx: Context[Any, Any], every: float, message: str) -> AsyncIterator[None]:
    async def report() -> None:
        waited = 0.0
        while True:
            await anyio.sleep(every)
            waited += every
            await ctx.report_progress(waited, None, f"{message} ({waited:.0f} s)")

    async with anyio.create_task_group() as group:
        group.start_soon(report)
        yield
        group.cancel_scope.cancel()


class ApprovalChannel:
    """Puts the SafetyVerification question to the client and returns the answer.

    The question's timeout bounds the wait for a person: past it the question counts as cancelled
    (handshake era), and an answer to an expired ticket no longer counts (2026-07-28). While waiting in
    the handshake era, progress notifications go out every `keepalive` seconds, to clients that asked
    for progress (a progress token), so they do not give up.
    """

    def __init__(self, keepalive: float = 10.0) -> None:
        self._keepalive = keepalive

    async def ask(
        self, ctx: Context[Any, Any], classification: Classification, question: Question
    ) -> Reply | InputRequiredResult:
        """The person's answer, or (2026-07-28) the question to hand back to the client.

        An answer counts once: the caller records it under `Reply.request_id` (the ticket id on
        2026-07-28), and a replayed ticket finds its answer already recorded.
        """
        if uses_input_required(ctx):
            return await self._ask_input_required(ctx, classification, question)
        request_id = uuid.uuid4().hex
        prompt = await question.prompt()
        await question.asking(request_id)
        async with progress_while_waiting(ctx, self._keepalive, "Waiting for approval"):
            reply = await self._elicit(ctx, prompt.text, question, request_id)
        return replace(reply, bounds=prompt.bounds)

    async def _elicit(self, ctx: Context[Any, Any], text: str, question: Question, request_id: str) -> Reply:
        try:
            # The SDK's own request timeout (it tells the client the request is cancelled when it expires),
            # rather than a cancel scope of our own around it: one less per waiting question.
            result = await ctx.session.send_request(
                _elicit_request(text, question.form),
                ElicitResult,
                request_read_timeout_seconds=question.timeout,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return Reply(Answer.TIMEOUT, None, request_id)
            logger.info("Elicitation failed on the client side, treated as cancelled: %s", exc)
            return Reply(Answer.CANCEL, None, request_id)
        except ValidationError as exc:  # e.g. an action other than accept, decline or cancel
            logger.info("The client's answer is not an elicitation result, treated as cancelled: %s", exc)
            return Reply(Answer.CANCEL, None, request_id)
        return _reply(result, question.form, request_id)

    async def _ask_input_required(
        self, ctx: Context[Any, Any], classification: Classification, question: Question
    ) -> Reply | InputRequiredResult:
        response = (ctx.input_responses or {}).get(APPROVAL_KEY)
        ticket = ApprovalTicket.decode(ctx.request_state)
        if isinstance(response, ElicitResult) and ticket is not None and ticket.covers(classification, question.caller):
            if ticket.expired:
                return Reply(Answer.TIMEOUT, None, ticket.id)
            reply = _reply(response, question.form, ticket.id)
            return replace(reply, bounds=ticket.bounds)
        prompt = await question.prompt()
        ticket = ApprovalTicket.issue(classification, question.timeout, question.caller, prompt.bounds)
        await question.asking(ticket.id)
        request = _elicit_request(prompt.text, question.form)
        return InputRequiredResult(input_requests={APPROVAL_KEY: request}, request_state=ticket.encode())


def _reply(result: ElicitResult, form: type[SafetyVerification], request_id: str) -> Reply:
    if result.action == "decline":
        return Reply(Answer.DECLINE, None, request_id)
    if result.action == "cancel":
        return Reply(Answer.CANCEL, None, request_id)
    try:
        return Reply(Answer.ACCEPT, form.model_validate(result.content or {}), request_id)
    except ValidationError:
        return Reply(Answer.ACCEPT, None, request_id)
