"""What the hash chain cannot check: that every answer in the log answers a question the log holds.

The hashes are not keyed, so whoever can write the log can append records that chain correctly. SafeDB
itself appends an answer only while the log holds its question (a `requested` record of the same request,
target and statement) and nothing has answered that request yet (`AnswerCheck.ASKED`). An answer without
one, such as an approval of a request that was never asked, was added by someone else.
"""

from __future__ import annotations

from typing import Any

from safedb.audit.events import AuditDecision

ANSWERS = frozenset(
    decision.value
    for decision in (
        AuditDecision.ACCEPTED,
        AuditDecision.DECLINED,
        AuditDecision.CANCELLED,
        AuditDecision.NOT_CONFIRMED,
        AuditDecision.TIMED_OUT,
    )
)
"""Decisions SafeDB records only in answer to a question it asked. Not `blocked` and `refused`: the policy and the
server also write those about statements never put to anyone."""

UNASKED_JUSTIFICATION = "not asked: the target's policy runs this kind of change without approval"
"""The justification of the one answer with no question before it: an `accepted` the target's policy gives
unasked (`AnswerCheck.UNASKED`), as the server records it."""


class QuestionsAsked:
    """The questions still unanswered at each point of the log, read in sequence order, to judge its answers.

    Only unanswered questions are kept: a log whose every question was answered holds none at its end.
    """

    def __init__(self) -> None:
        self._open: dict[Any, set[int]] = {}
        """Request id -> the hashes of the questions (target and statement) asked under it."""

    def unasked_answer(self, content: dict[str, Any]) -> str | None:
        """The decision of a record (its stored fields) that answers no question the log holds open; None when it
        is a question, answers one, or is no answer. Call once per record, in sequence order."""
        decision, request = content.get("decision"), content.get("request_id")
        # Hashed, not kept: only a collision within this process (Python's hash is seeded at random per process)
        # could let an unasked answer pass.
        question = hash((content.get("target"), content.get("sql")))
        if decision == AuditDecision.REQUESTED.value:
            self._open.setdefault(request, set()).add(question)
            return None
        asked = self._open.pop(request, None)  # any other record of a request answers it (`AnswerCheck`)
        if decision not in ANSWERS or (asked is not None and question in asked):
            return None
        if (
            asked is None
            and decision == AuditDecision.ACCEPTED.value
            and content.get("justification") == UNASKED_JUSTIFICATION
        ):
            return None
        return str(decision)
