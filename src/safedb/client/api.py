"""Answering elicitations from a program: return a typed object, a dict, or an explicit decline/cancel.

    from safedb.client import Cancel, Decline, FormQuestion, elicitation_handler

    async def approve(question: FormQuestion) -> object:
        if "DROP" in question.message:
            return Decline()
        return question.model(confirm=True, justification="nightly cleanup", environment="Development")

    async with Client(url, elicitation_callback=elicitation_handler(approve)) as client: ...

Every answer is checked against the requested schema before it is sent; one that does not fit is
never sent (the question is cancelled and a warning logged). A function that raises cancels its
question too (the exception is logged). URL-mode questions are declined unless an `on_url` function
is given.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp_types import ElicitRequestFormParams, ElicitRequestParams, ElicitRequestURLParams, ElicitResult, ErrorData
from pydantic import BaseModel, ValidationError

from safedb.client.model import InvalidAnswer, dump_content, form_model, problems_by_field
from safedb.client.schema import UnsupportedSchema, parse_requested_schema

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decline:
    """Answer "no": the person (or program) explicitly refuses."""


@dataclass(frozen=True)
class Cancel:
    """Dismiss the question without choosing."""


@dataclass(frozen=True)
class Accept:
    """Consent to a URL-mode question (there is no content to send)."""


@dataclass(frozen=True)
class FormQuestion:
    message: str
    requested_schema: dict[str, Any]
    model: type[BaseModel]
    """`schema_to_model(requested_schema)`: build the answer with it, or validate a dict."""
    params: ElicitRequestFormParams


FormReply = BaseModel | Mapping[str, Any] | Decline | Cancel
UrlReply = Accept | Decline | Cancel


def elicitation_handler(
    answer: Callable[[FormQuestion], Awaitable[FormReply]],
    on_url: Callable[[ElicitRequestURLParams], Awaitable[UrlReply]] | None = None,
) -> ElicitationFnT:
    """An `elicitation_callback` for `mcp.client.client.Client` that lets `answer` reply with typed values."""

    async def callback(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if isinstance(params, ElicitRequestURLParams):
            try:
                reply: UrlReply = await on_url(params) if on_url is not None else Decline()
            except Exception:
                return _failed("a URL question")
            if not isinstance(reply, Accept | Decline | Cancel):
                return _not_an_answer(reply, "a URL question", "Accept(), Decline() or Cancel()")
            return ElicitResult(action=_action(reply))
        try:
            form = parse_requested_schema(params.requested_schema)
        except UnsupportedSchema as exc:
            logger.warning("Cancelled an elicitation whose schema cannot be answered: %s", exc)
            return ElicitResult(action="cancel")
        model = form_model(form)
        try:
            form_reply = await answer(FormQuestion(params.message, params.requested_schema, model, params))
        except ValidationError as exc:  # `question.model(...)` refused the answer the program was building
            return _does_not_fit(InvalidAnswer(problems_by_field(exc)))
        except Exception:
            return _failed("a form")
        if isinstance(form_reply, Decline | Cancel):
            return ElicitResult(action=_action(form_reply))
        if not isinstance(form_reply, BaseModel | Mapping):
            return _not_an_answer(form_reply, "a form", "a model, a dict, Decline() or Cancel()")
        try:
            return ElicitResult(action="accept", content=answer_content(model, form_reply))
        except InvalidAnswer as exc:
            return _does_not_fit(exc)

    return callback


def answer_content(model: type[BaseModel], reply: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """The content to send for a typed or dict answer, checked against the schema's model.

    Raises:
        InvalidAnswer: the answer does not fit.
    """
    data = reply.model_dump(mode="json", by_alias=True, exclude_none=True) if isinstance(reply, BaseModel) else reply
    try:
        return dump_content(model.model_validate(dict(data)))
    except ValidationError as exc:
        raise InvalidAnswer(problems_by_field(exc)) from None


def _does_not_fit(problem: InvalidAnswer) -> ElicitResult:
    logger.warning("Cancelled an elicitation: the program's answer does not fit the schema: %s", problem)
    return ElicitResult(action="cancel")


def _not_an_answer(reply: object, question: str, expected: str) -> ElicitResult:
    # A wrong type (Accept() for a form, a forgotten return) is a bug in the program, but raising here would
    # fail the call, or in 2026-07-28 the whole Client; like an answer that does not fit, it is not sent.
    logger.warning("Cancelled %s: the program answered %r, not %s", question, reply, expected)
    return ElicitResult(action="cancel")


def _failed(question: str) -> ElicitResult:
    # Raised out of the callback, the exception would be sent to the server as an error reply in the handshake
    # era, and end the whole `Client` in 2026-07-28 (the callback runs within `call_tool`): one outcome for both.
    logger.exception("Cancelled %s: the program's answer function raised", question)
    return ElicitResult(action="cancel")


def _action(reply: Accept | Decline | Cancel) -> Any:
    if isinstance(reply, Accept):
        return "accept"
    return "decline" if isinstance(reply, Decline) else "cancel"
