"""What both audit stores share: one writer connection behind a lock, and async methods that run the
blocking ones in a worker thread (or, for short SQLite appends, on the event loop's thread when they
cannot wait), so the event loop never waits on a lock, a slow disk or a server."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, Self, TypeVar, overload

import anyio.to_thread

from safedb.audit.events import AuditEvent
from safedb.audit.records import AuditRecord
from safedb.audit.store import AnswerCheck, AuditQuery


class Closable(Protocol):
    def close(self) -> None: ...


WriterT = TypeVar("WriterT", bound=Closable)


class ThreadedAuditStore(Generic[WriterT]):
    """Base of the stores: subclasses implement `append` and `records`; `_writer` is their connection for
    appending (None when opened read-only)."""

    def __init__(self, writer: WriterT | None) -> None:
        self._writer = writer
        self._lock = threading.Lock()
        # Appends wait for the one writer in turn: a single worker thread at a time is enough, and many
        # calls appending at once then queue here instead of each taking a thread (and its memory).
        self._append_threads = anyio.CapacityLimiter(1)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    async def record(self, event: AuditEvent) -> AuditRecord:
        """Append `event` without holding up the event loop."""
        record = await self._append_soon(event, None)
        assert record is not None  # only an answer can be refused
        return record

    async def record_answer(self, event: AuditEvent, check: AnswerCheck = AnswerCheck.ASKED) -> AuditRecord | None:
        """Append the answer to a question, unless that question (`event.request_id`) already has one; with
        `AnswerCheck.ASKED`, only when the log holds the question (else QuestionNotRecorded).

        The checks and the append happen under the store's write lock, so an answer is acted on once even
        when several server processes share the log: None means it was already answered (a replay).
        """
        return await self._append_soon(event, check)

    async def _append_soon(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        """`append` from the event loop: in a worker thread, unless a store knows a cheaper way.

        A cancelled caller stops waiting at once, even for a write lock held elsewhere; the append may still
        complete in its thread (a record is written whole or not at all)."""
        return await anyio.to_thread.run_sync(
            self.append, event, check, abandon_on_cancel=True, limiter=self._append_threads
        )

    async def query(self, query: AuditQuery) -> Sequence[AuditRecord]:
        return await anyio.to_thread.run_sync(lambda: list(self.records(query)))

    @overload
    def append(self, event: AuditEvent, check: None = None) -> AuditRecord: ...

    @overload
    def append(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None: ...

    def append(self, event: AuditEvent, check: AnswerCheck | None = None) -> AuditRecord | None:
        """Append `event` as the next record and return it. AuditWriteFailed when it cannot be written.

        With a `check` (an answer), nothing is appended (None is returned) when the event's request already
        has a record other than `requested`; see `AnswerCheck`.
        """
        return self._write(event, check)

    def _write(self, event: AuditEvent, check: AnswerCheck | None) -> AuditRecord | None:
        raise NotImplementedError

    def records(self, query: AuditQuery) -> Iterator[AuditRecord]:
        raise NotImplementedError
