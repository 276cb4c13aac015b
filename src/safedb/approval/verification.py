"""The `SafetyVerification` form and the rules that turn an answer into a decision."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from safedb.approval.display import readable_length

Environment = Literal["Development", "Staging", "Production"]

JUSTIFICATION_MAX_CHARS = 2000
"""The longest justification an answer may give: every answer is kept in the audit log, which a client must not
be able to fill with megabytes of text."""
TARGET_NAME_MAX_CHARS = 64
"""The longest target name (configuration files), and so the longest one the form takes typed back."""


def approver_justification(approver: str, justification: str) -> str:
    """How an approval page's decision is recorded as the answer's justification: `alice: <justification>`, or just
    `alice` when they gave none."""
    return f"{approver}: {justification}" if justification else approver


def justification_room(approver: str) -> int:
    """The longest justification `approver` may give on the approval page: its answer holds their name too."""
    return JUSTIFICATION_MAX_CHARS - len(approver_justification(approver, " ")) + 1


class SafetyVerification(BaseModel):
    """The answer SafeDB asks for before a statement that changes anything."""

    model_config = ConfigDict(extra="forbid", title="SafetyVerification")

    # Strict: "yes", "true" or 1 are not a person ticking the box.
    confirm: StrictBool = Field(title="Run this statement?", description="Must be true for the statement to run.")
    justification: str = Field(
        title="Justification",
        # The least a Production change needs is the target's (`min_justification`), which the question states.
        description=(
            f"Why this change is needed, in at most {JUSTIFICATION_MAX_CHARS:,} characters; a Production change "
            "needs as many as the question says."
        ),
        max_length=JUSTIFICATION_MAX_CHARS,
    )
    environment: Environment = Field(
        title="Environment", description="The environment you intend to change: Development, Staging or Production."
    )


class NamedSafetyVerification(SafetyVerification):
    """The form for targets that want the person to type the target's name back."""

    model_config = ConfigDict(extra="forbid", title="SafetyVerification")

    target_name: str = Field(
        title="Target name",
        description="Type the name of the database target you are changing, to confirm it.",
        max_length=TARGET_NAME_MAX_CHARS,
    )


def verification_form(type_target_name: bool) -> type[SafetyVerification]:
    return NamedSafetyVerification if type_target_name else SafetyVerification


class Answer(StrEnum):
    """How the person answered the elicitation itself."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"
    TIMEOUT = "timeout"
    """No answer came within the approval timeout; treated as cancelled."""


class Verdict(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    NOT_CONFIRMED = "not_confirmed"
    BLOCKED = "blocked"
    INVALID = "invalid"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    verification: SafetyVerification | None = None

    @property
    def approved(self) -> bool:
        return self.verdict is Verdict.APPROVED


@dataclass(frozen=True)
class ApprovalRules:
    """What an accepted answer must satisfy for one target."""

    target_name: str
    production_target: bool = False
    """A production target needs answers that say Production."""
    min_production_justification: int = 10
    type_target_name: bool = False


def decide(answer: Answer, verification: SafetyVerification | None, rules: ApprovalRules) -> Decision:
    """Apply the approval rules to one elicitation answer."""
    if answer is Answer.DECLINE:
        return Decision(Verdict.DECLINED, "The request was declined. The statement was not run; nothing changed.")
    if answer is Answer.CANCEL:
        return Decision(Verdict.CANCELLED, "The request was cancelled. The statement was not run; nothing changed.")
    if answer is Answer.TIMEOUT:
        return Decision(
            Verdict.TIMED_OUT, "No answer came in time, so the request was cancelled. The statement was not run."
        )
    if verification is None:
        return Decision(
            Verdict.INVALID,
            "The answer did not match the SafetyVerification form (confirm true or false, a justification of at most "
            f"{JUSTIFICATION_MAX_CHARS:,} characters, and an environment: Development, Staging or Production). "
            "Nothing was run.",
        )
    if not verification.confirm:
        return Decision(
            Verdict.NOT_CONFIRMED,
            "The statement was not confirmed (confirm=false). It was not run; nothing changed.",
            verification,
        )
    if rules.production_target and verification.environment != "Production":
        return Decision(
            Verdict.BLOCKED,
            f"Blocked: {rules.target_name!r} is a production database, and the answer named "
            f"{verification.environment}. The statement was not run; nothing changed.",
            verification,
        )
    typed = getattr(verification, "target_name", None)
    if rules.type_target_name and (typed or "").strip() != rules.target_name:
        return Decision(
            Verdict.BLOCKED,
            f"Blocked: the target name typed ({typed!r}) is not {rules.target_name!r}. "
            "The statement was not run; nothing changed.",
            verification,
        )
    minimum = rules.min_production_justification
    if verification.environment == "Production" and readable_length(verification.justification) < minimum:
        return Decision(
            Verdict.BLOCKED,
            f"Blocked: a Production change needs a justification of at least {minimum} characters. "
            "The statement was not run; nothing changed.",
            verification,
        )
    return Decision(Verdict.APPROVED, "Approved.", verification)
