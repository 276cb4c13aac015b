"""What an audit store offers, whatever keeps the records (an SQLite file, a PostgreSQL schema)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from safedb.audit.errors import QuestionNotRecorded
from safedb.audit.events import AuditDecision, AuditEvent
from safedb.audit.records import AuditRecord


@dataclass(frozen=True)
class AuditQuery:
    """Which records to list. Every filter given must match; times are stored-format UTC strings."""

    target: str | None = None
    decisions: tuple[AuditDecision, ...] = ()
    request_id: str | None = None
    since: str | None = None
    """Records at or after this time."""
    until: str | None = None
    """Records before this time."""
    limit: int | None = None
    """At most this many records: the most recent ones, still listed oldest first."""


class AnswerCheck(Enum):
    """What the log must hold before an answer is appended (and synced to the disk before the append returns)."""

    UNASKED = "unasked"
    """No answer yet to its request: a decision no one was asked for (a change the policy lets run unasked)."""
    ASKED = "asked"
    """As UNASKED, and its question: a `requested` record of the same request, target and statement."""

    def passes(self, answered: bool, asked: bool) -> bool:
        """Whether an answer may be appended, given whether its request already has an answer (then False: a
        replay) and whether the log holds its question (QuestionNotRecorded when this check needs it)."""
        if answered:
            return False
        if self is AnswerCheck.ASKED and not asked:
            raise QuestionNotRecorded
        return True


@dataclass(frozen=True)
class ChainHead:
    """The anchor written with every append: the last sequence number and hash. Catches deleted last records."""

    seq: int
    hash: str


@dataclass(frozen=True)
class ChainEntry:
    """One record as stored, read leniently (no shape checks) so that verification can judge it."""

    seq: int
    content: dict[str, Any] = field(repr=False)
    """The hashed fields as stored, `prev_hash` included."""
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class UnnumberedEntry:
    """A stored row whose sequence number is not a whole number (NULL, text): SafeDB never writes one, and only a
    table rebuilt without its constraints can hold one."""

    stored_seq: object


@dataclass(frozen=True)
class ChainSnapshot:
    """The head anchor and every record, read in one consistent snapshot, records in sequence order."""

    head: ChainHead | None
    entries: Iterator[ChainEntry | UnnumberedEntry]


class AuditStore(Protocol):
    """An append-only, hash-chained log of decisions. There is no way to change or remove a record."""

    @property
    def label(self) -> str:
        """Where the log is kept, for people to read (a file's path; never a password)."""
        ...

    async def record(self, event: AuditEvent) -> AuditRecord:
        """Append one event (off the event loop) and return it as stored."""
        ...

    async def record_answer(self, event: AuditEvent, check: AnswerCheck = AnswerCheck.ASKED) -> AuditRecord | None:
        """Append an answer unless the question already has one (then None: the answer is a replay).

        Raises:
            QuestionNotRecorded: with `AnswerCheck.ASKED`, the log does not hold the question.
        """
        ...

    async def query(self, query: AuditQuery) -> Sequence[AuditRecord]:
        """The records matching `query`, oldest first."""
        ...

    def append(self, event: AuditEvent) -> AuditRecord:
        """Blocking form of `record`."""
        ...

    def records(self, query: AuditQuery) -> Iterator[AuditRecord]:
        """Blocking, streaming form of `query`."""
        ...

    def snapshot(self) -> AbstractContextManager[ChainSnapshot]:
        """The raw chain for verification; entries can be read while the context is open."""
        ...

    def close(self) -> None: ...

    async def aclose(self) -> None:
        """`close` off the event loop."""
        ...

    def __enter__(self) -> AuditStore: ...

    def __exit__(self, *exc_info: object) -> None: ...
