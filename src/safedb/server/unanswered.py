"""2026-07-28 questions that no one comes back to: recorded as timed out once they can no longer be answered.

On 2026-07-28 a question leaves with the call's result (an `InputRequiredResult`), and only the client's retry
brings its answer. A client that never retries (it crashed, gave up, or was told no on the approval page and
never asked again) would leave the log saying only `requested`. So the server keeps, for each question it asked
and has not seen answered, its request id and when it expires (not the statement: thousands may wait), and when
one expires unanswered it appends `timed_out` after the question's `requested` record, with the approver's
decision when one was made on the page. The log's answer check makes this count once: an answer recorded
meanwhile (by another process sharing the log) leaves the question as it is.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time

from safedb.approval.board import ApprovalBoard, BoardVerdict
from safedb.audit import (
    AnswerCheck,
    AuditDecision,
    AuditEvent,
    AuditQuery,
    AuditStore,
    AuditWriteFailed,
    QuestionNotRecorded,
)

logger = logging.getLogger(__name__)

NO_RETURN = "No answer came back before the question expired: the client never returned with it."

_KEPT_ANSWERED = 1024
"""Answered questions whose place in the queue may wait for their expiry before the queue is rebuilt without them
(a busy server answers hundreds a second, each of which would otherwise be held until it expires)."""
_LONGEST_NAP = 5.0
"""Seconds the watch sleeps at most, so that a question with a shorter timeout than those before it is not late."""


class UnansweredQuestions:
    """The 2026-07-28 questions of this process that are still open, by when they expire."""

    def __init__(self, audit: AuditStore, board: ApprovalBoard) -> None:
        self._audit = audit
        self._board = board
        self._due: list[tuple[float, str]] = []
        self._open: set[str] = set()
        self._watch: asyncio.Task[None] | None = None

    def asked(self, request_id: str, timeout: float) -> None:
        """A question went out under `request_id`, answerable for `timeout` seconds."""
        heapq.heappush(self._due, (time.monotonic() + timeout, request_id))
        self._open.add(request_id)
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._record_when_due())

    def answered(self, request_id: str) -> None:
        """The question's answer came back (and is recorded by the call it came with)."""
        self._open.discard(request_id)
        if len(self._due) > 2 * len(self._open) + _KEPT_ANSWERED:  # mostly answered ones: let them go
            self._due = [entry for entry in self._due if entry[1] in self._open]
            heapq.heapify(self._due)

    async def _record_when_due(self) -> None:
        while self._due:
            due, request_id = self._due[0]
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(min(wait, _LONGEST_NAP))
                continue
            heapq.heappop(self._due)
            if request_id in self._open:
                self._open.discard(request_id)
                await self._record_timed_out(request_id)

    async def _record_timed_out(self, request_id: str) -> None:
        try:
            records = await self._audit.query(AuditQuery(request_id=request_id))
            asked = next((record for record in records if record.decision is AuditDecision.REQUESTED), None)
            if asked is None:
                return
            event = AuditEvent(
                AuditDecision.TIMED_OUT,
                request_id,
                asked.target,
                asked.sql,
                caller=asked.caller,
                classification=asked.classification,
                changes=asked.changes,
                error=self._why(request_id),
            )
            await self._audit.record_answer(event, AnswerCheck.ASKED)  # None: answered meanwhile, elsewhere
        except QuestionNotRecorded:
            pass
        except AuditWriteFailed as exc:
            logger.error("An expired question could not be recorded as timed out in the audit log: %s", exc)

    def _why(self, request_id: str) -> str:
        approval = self._board.get(request_id)
        if approval is None or approval.verdict not in (BoardVerdict.APPROVED, BoardVerdict.REJECTED):
            return NO_RETURN
        decided = "approved" if approval.verdict is BoardVerdict.APPROVED else "rejected"
        because = f" ({approval.justification})" if approval.justification else ""
        return f"{NO_RETURN} On the approval page, {approval.approver} had {decided} it{because}."
