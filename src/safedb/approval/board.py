"""Approvals that wait for a person on the web page: created by a tool call, decided once on the page."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum

import anyio

from safedb.db.backend import Impact
from safedb.sql.classification import Classification


class BoardVerdict(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    """Nothing waits for a decision any more: the client declined to open the page, or the call ended."""


@dataclass
class WebApproval:
    """One statement waiting for an approver. `link_token` is the secret part of its link."""

    id: str
    target: str
    environment: str
    classification: Classification
    impact: Impact
    """The preview the page shows; an approval holds for its row count (`Impact.rows_affected`)."""
    caller: str
    created: float
    expires: float
    link_token: str
    min_justification: int
    """Characters the approver's justification needs (production targets)."""
    verdict: BoardVerdict = BoardVerdict.PENDING
    approver: str | None = None
    justification: str | None = None
    decided: anyio.Event = field(default_factory=anyio.Event)

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires


class ApprovalBoard:
    """The approvals of this server process, by id. Each is decided at most once, before it expires."""

    def __init__(self) -> None:
        self._approvals: dict[str, WebApproval] = {}

    def open(
        self,
        approval_id: str,
        *,
        target: str,
        environment: str,
        classification: Classification,
        impact: Impact,
        caller: str,
        timeout: float,
        min_justification: int,
    ) -> WebApproval:
        self._forget_old()
        now = time.time()
        approval = WebApproval(
            id=approval_id,
            target=target,
            environment=environment,
            classification=classification,
            impact=impact,
            caller=caller,
            created=now,
            expires=now + timeout,
            link_token=secrets.token_urlsafe(24),
            min_justification=min_justification,
        )
        self._approvals[approval_id] = approval
        return approval

    def get(self, approval_id: str) -> WebApproval | None:
        return self._approvals.get(approval_id)

    def pending(self) -> list[WebApproval]:
        return [a for a in self._approvals.values() if a.verdict is BoardVerdict.PENDING and not a.expired]

    def decide(self, approval: WebApproval, *, approve: bool, approver: str, justification: str) -> bool:
        """Record the approver's decision; False when the approval was already decided or has expired."""
        if approval.verdict is not BoardVerdict.PENDING or approval.expired:
            return False
        approval.verdict = BoardVerdict.APPROVED if approve else BoardVerdict.REJECTED
        approval.approver = approver
        approval.justification = justification
        approval.decided.set()
        return True

    def withdraw(self, approval: WebApproval) -> None:
        """Nothing waits for this approval any more: if undecided (and not expired), it can no longer be decided."""
        if approval.verdict is BoardVerdict.PENDING and not approval.expired:
            approval.verdict = BoardVerdict.WITHDRAWN
            approval.decided.set()

    def _forget_old(self) -> None:
        """Drop approvals that ended more than an hour ago."""
        horizon = time.time() - 3600
        self._approvals = {key: a for key, a in self._approvals.items() if a.expires > horizon}
