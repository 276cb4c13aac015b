"""What an audit store offers, whatever keeps the records (an SQLite file, a PostgreSQL schema)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

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
class ChainSnapshot:
    """The head anchor and every record, read in one consistent snapshot, records in sequence order."""

    head: ChainHead | None
    entries: Iterator[ChainEntry]


class AuditStore(Protocol):
    """An append-only, hash-chained log of decisions. There is no way to change or remove a record."""

    async def record(self, event: AuditEvent) -> AuditRecord:
        """Append one event (off the event loop) and return it as stored."""
        ...

    async def record_answer(self, event: AuditEvent) -> AuditRecord | None:
        """Append an answer unless the question already has one (then None: the answer is a replay)."""
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
