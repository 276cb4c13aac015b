"""Approvals that wait for a person on the web page: created by a tool call, decided once on the page."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum

import anyio

from safedb import wording
from safedb.db.backend import Impact
from safedb.errors import TooManyWaiting
from safedb.sql.classification import Classification

MAX_WAITING = 1_000
"""Undecided approvals one process holds at once: each keeps its statement and preview until it expires."""
MAX_WAITING_CHARACTERS = 50_000_000
"""Characters of statements those may hold in all (one statement may have a million)."""
MAX_SETTLED = 1_000
"""Withdrawn and expired approvals kept for the page (the newest ones): what they say no longer matters to a call."""
KEPT_AFTER_END = 3600.0
"""Seconds an approval stays on the board after it expires."""


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

    @property
    def settled(self) -> bool:
        """Whether no call can act on it any more: withdrawn, or expired (a decision given in time included)."""
        return self.verdict is BoardVerdict.WITHDRAWN or self.expired


class ApprovalBoard:
    """The approvals of this server process, by id. Each is decided at most once, before it expires.

    Bounded: at most `MAX_WAITING` undecided ones (more are refused), and `MAX_SETTLED` settled ones. Decided
    approvals that have not expired are all kept: a 2026-07-28 client comes back for its decision, and
    people, not clients, make them.
    """

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
        """A new approval, waiting. Raises TooManyWaiting when the board holds as many as it takes."""
        self._forget_old()
        waiting = self.pending()
        if len(waiting) >= MAX_WAITING:
            raise TooManyWaiting(f"{wording.count(MAX_WAITING, 'approval')} waiting for an approver")
        characters = sum(len(a.classification.statement) for a in waiting) + len(classification.statement)
        if characters > MAX_WAITING_CHARACTERS:
            raise TooManyWaiting(f"as many waiting statements as it takes ({MAX_WAITING_CHARACTERS:,} characters)")
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
        """Drop approvals that expired more than `KEPT_AFTER_END` ago, and, past `MAX_SETTLED` settled ones, those
        asked longest ago (a client that declines, or never comes back, leaves one each time)."""
        horizon = time.time() - KEPT_AFTER_END
        self._approvals = {key: a for key, a in self._approvals.items() if a.expires > horizon}
        settled = [key for key, approval in self._approvals.items() if approval.settled]
        for key in settled[: max(len(settled) - MAX_SETTLED, 0)]:
            del self._approvals[key]
