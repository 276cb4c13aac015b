"""What the server tells the audit log: one decision about one statement, as a typed event."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

from safedb.approval.verification import Verdict
from safedb.sql.classification import Classification


class AuditDecision(StrEnum):
    """Every kind of record the audit log holds. One tool call yields several, linked by `request_id`."""

    REQUESTED = "requested"
    """A statement that changes something was put to a person for approval."""
    ACCEPTED = "accepted"
    """The person accepted and the approval rules passed; the statement is about to run."""
    DECLINED = "declined"
    CANCELLED = "cancelled"
    """The person cancelled, or the call was cancelled while its question waited (`error` says so)."""
    NOT_CONFIRMED = "not_confirmed"
    """The person answered the form but left `confirm` false."""
    BLOCKED = "blocked"
    """Stopped by policy: the deny list, or an approval rule (e.g. a short Production justification)."""
    REFUSED = "refused"
    """Never put to anyone, or the answer could not count: no elicitation capability, transaction control,
    several statements, an answer that does not fit the form, a replayed approval."""
    TIMED_OUT = "timed_out"
    """No answer arrived while the question could still be answered."""
    EXECUTED = "executed"
    """The statement ran and committed; `rows_affected` says how many rows it changed."""
    FAILED = "failed"
    """The statement ran and was rolled back: the database raised an error, or it affected another number of
    rows than the approved preview showed (`error` says which)."""


def decision_for_verdict(verdict: Verdict) -> AuditDecision:
    """The audit decision that records an approval verdict."""
    match verdict:
        case Verdict.APPROVED:
            return AuditDecision.ACCEPTED
        case Verdict.DECLINED:
            return AuditDecision.DECLINED
        case Verdict.CANCELLED:
            return AuditDecision.CANCELLED
        case Verdict.TIMED_OUT:
            return AuditDecision.TIMED_OUT
        case Verdict.NOT_CONFIRMED:
            return AuditDecision.NOT_CONFIRMED
        case Verdict.BLOCKED:
            return AuditDecision.BLOCKED
        case Verdict.INVALID:
            return AuditDecision.REFUSED
        case _:
            assert_never(verdict)


@dataclass(frozen=True)
class AuditEvent:
    """One decision, before the store gives it a sequence number, a time and its place in the hash chain."""

    decision: AuditDecision
    request_id: str
    """Links the records of one tool call (requested, accepted, executed...); the approval id when there is one."""
    target: str
    """The database the statement is for, as the server names it."""
    sql: str
    caller: str | None = None
    """Who asked: the MCP client (name/version, session) as the server identifies it."""
    classification: str = ""
    """One line such as `data change (delete)`; empty when the statement was refused before classification."""
    changes: tuple[str, ...] = ()
    """What the statement would do, one entry per change, e.g. `delete table users`."""
    justification: str | None = None
    environment: str | None = None
    rows_affected: int | None = None
    error: str | None = None

    @classmethod
    def about(
        cls,
        decision: AuditDecision,
        classification: Classification,
        *,
        request_id: str,
        target: str,
        caller: str | None = None,
    ) -> AuditEvent:
        """An event about a classified statement; add answers and outcomes with `followed_by`."""
        return cls(
            decision=decision,
            request_id=request_id,
            target=target,
            sql=classification.statement,
            caller=caller,
            classification=classification.summary,
            changes=classification.change_lines,
        )

    def followed_by(self, decision: AuditDecision, **fields: Any) -> AuditEvent:
        """The next event of the same tool call: same statement and request, a new decision, more fields.

        Fields set earlier (justification, environment) carry over unless given again.
        """
        return dataclasses.replace(self, decision=decision, **fields)
