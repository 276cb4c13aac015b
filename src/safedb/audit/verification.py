"""Checking the hash chain: finding the first record that was edited, deleted or inserted, and naming it.

Records are read in sequence order with one record of look-ahead. Each must carry the next sequence
number, chain from the hash of the record before it, and hash to its own stored hash; the last must
match the head anchor. When a record does not fit, its neighbours tell what happened to it:

- a gap in the sequence numbers, or a record renumbered down to close one: records were deleted;
- the next record chains from the record before this one, or two records chain from the same one:
  a record was inserted;
- otherwise the record (or the one before it, when only the link fails) was edited.

A row with no whole sequence number (a table rebuilt without its constraints) is named where it sorts. And an
answer with no question before it (`safedb.audit.answers`) was added outside SafeDB, however well it chains.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from safedb.audit.answers import QuestionsAsked
from safedb.audit.chain import GENESIS_HASH, chain_hash
from safedb.audit.store import AuditStore, ChainEntry, ChainHead, UnnumberedEntry

_RENUMBER_SEARCH = 10_000
"""How far ahead to look for the original sequence number of a renumbered record."""
_SHOWN_SEQ_CHARS = 40
"""Characters of a sequence number that is not a number shown in a finding."""


class Tampering(StrEnum):
    EDITED = "edited"
    DELETED = "deleted"
    INSERTED = "inserted"
    HEAD_MISSING = "head_missing"
    UNASKED_ANSWER = "unasked_answer"
    """An answer (`accepted`...) to a question the log does not hold: added outside SafeDB, though it chains."""


@dataclass(frozen=True)
class Finding:
    kind: Tampering
    seq: int | None
    """The record the finding is about (for deletions, the first missing sequence number)."""
    reason: str
    """One line naming the record."""


@dataclass(frozen=True)
class VerificationReport:
    checked: int
    """Records that were found intact before the first finding (all of them when intact)."""
    head: ChainHead | None
    finding: Finding | None = None

    @property
    def intact(self) -> bool:
        return self.finding is None

    def summary(self) -> str:
        """One line for people."""
        if self.finding is not None:
            return f"Audit log NOT intact: {self.finding.reason}"
        last = f"; last record {self.head.seq}, hash {self.head.hash}" if self.head and self.head.seq else ""
        return f"Audit log intact: {self.checked} records{last}."


def verify(store: AuditStore) -> VerificationReport:
    """Check the whole chain and the head anchor in one consistent snapshot of the store."""
    with store.snapshot() as snapshot:
        return _verify(snapshot.head, snapshot.entries)


def _verify(head: ChainHead | None, entries: Iterator[ChainEntry | UnnumberedEntry]) -> VerificationReport:
    previous: ChainEntry | None = None
    questions = QuestionsAsked()
    # An answer with no question is named only if the chain holds: a record found edited or inserted (which
    # the chain may show only at the record after it) is named as that.
    unasked: Finding | None = None
    checked = 0
    entry = next(entries, None)
    while entry is not None:
        following = next(entries, None)
        if isinstance(entry, UnnumberedEntry):
            return VerificationReport(checked, head, _unnumbered(entry, previous, following, head))
        finding = _check(entry, previous, following if isinstance(following, ChainEntry) else None, head)
        if finding is not None:
            # The finding may name an earlier record than this one (the one before a broken link).
            return VerificationReport(checked if finding.seq is None else finding.seq - 1, head, finding)
        unasked = unasked or _check_answer(entry, questions)
        previous, entry = entry, following
        checked += 1
    finding = _check_head(previous, head) or unasked
    if finding is not None and finding.seq is not None:
        checked = min(checked, finding.seq - 1)
    return VerificationReport(checked, head, finding)


def _check(
    entry: ChainEntry, previous: ChainEntry | None, following: ChainEntry | None, head: ChainHead | None
) -> Finding | None:
    seq = entry.seq
    expected_seq = previous.seq + 1 if previous else 1
    expected_prev = previous.hash if previous else GENESIS_HASH
    if previous is not None and seq == previous.seq:
        return Finding(Tampering.INSERTED, seq, f"record {seq} was inserted: two records have sequence number {seq}.")
    if seq > expected_seq:
        return _deleted(expected_seq, seq - 1, f"the sequence jumps from {expected_seq - 1} to {seq}")
    if head is not None and seq > head.seq:
        return Finding(
            Tampering.INSERTED, seq,
            f"record {seq} was inserted: the head anchor says the last record SafeDB wrote is {head.seq}.",
        )  # fmt: skip
    content_ok = _content_hash(entry.content) == entry.hash
    link_ok = entry.prev_hash == expected_prev
    if content_ok and link_ok:
        return None
    if following is not None and following.prev_hash == expected_prev:
        return Finding(
            Tampering.INSERTED, seq,
            f"record {seq} was inserted: record {following.seq} chains from {_record(seq - 1)}, skipping it.",
        )  # fmt: skip
    if not link_ok and previous is not None and entry.prev_hash == previous.prev_hash:
        # Two records chain from the same one. If this one was renumbered up, the one before it was slipped
        # in; otherwise this one is the newcomer.
        inserted = previous.seq if _hashes_as(entry, previous.seq) else seq
        return Finding(
            Tampering.INSERTED, inserted,
            f"record {inserted} was inserted: records {previous.seq} and {seq} both chain from {_record(seq - 2)}.",
        )  # fmt: skip
    if not link_ok:
        original = _original_seq(entry)
        if original is not None:
            return _deleted(seq, original - 1, f"record {original} was renumbered to {seq} to hide the gap")
        if content_ok:
            edited = previous.seq if previous is not None else seq
            return Finding(
                Tampering.EDITED, edited,
                f"record {edited} was edited: record {seq} chains from a hash that record {edited} no longer has.",
            )  # fmt: skip
        return Finding(
            Tampering.EDITED, seq,
            f"record {seq} was edited: neither its contents nor its link to {_record(seq - 1)} match its hash.",
        )  # fmt: skip
    return Finding(Tampering.EDITED, seq, f"record {seq} was edited: its contents do not match its hash.")


def _check_answer(entry: ChainEntry, questions: QuestionsAsked) -> Finding | None:
    decision = questions.unasked_answer(entry.content)
    if decision is None:
        return None
    return Finding(
        Tampering.UNASKED_ANSWER, entry.seq,
        f"record {entry.seq} was added outside SafeDB: it answers ({decision}) a question the log does not hold "
        "(no unanswered `requested` record of the same request, target and statement comes before it).",
    )  # fmt: skip


def _unnumbered(
    entry: UnnumberedEntry,
    previous: ChainEntry | None,
    following: ChainEntry | UnnumberedEntry | None,
    head: ChainHead | None,
) -> Finding:
    """A row whose sequence number is no whole number, named by where it sorts among the others."""
    position = previous.seq + 1 if previous else 1
    stored = entry.stored_seq
    shown = "NULL" if stored is None else ascii(stored)
    if len(shown) > _SHOWN_SEQ_CHARS:
        shown = shown[: _SHOWN_SEQ_CHARS - 1] + "…"
    what = f"its sequence number is {shown}, not a whole number"
    if isinstance(following, ChainEntry) and following.seq == position:
        return Finding(Tampering.INSERTED, None, f"a record was inserted before record {position}: {what}.")
    if head is not None and position > head.seq:
        return Finding(
            Tampering.INSERTED, None,
            f"a record was inserted after {_record(position - 1)}, where the head anchor says the log ends: {what}.",
        )  # fmt: skip
    return Finding(Tampering.EDITED, position, f"record {position} was edited: {what}.")


def _check_head(last: ChainEntry | None, head: ChainHead | None) -> Finding | None:
    last_seq = last.seq if last else 0
    last_hash = last.hash if last else GENESIS_HASH
    if head is None:
        return Finding(
            Tampering.HEAD_MISSING,
            None,
            "the head anchor is missing or unreadable, so deleted last records cannot be ruled out.",
        )
    if head.seq > last_seq:
        return _deleted(last_seq + 1, head.seq, f"the head anchor says the last record is {head.seq}")
    if head.hash != last_hash:
        return Finding(
            Tampering.EDITED, last_seq, f"record {last_seq} was edited: its hash differs from the head anchor's."
        )
    return None


def _record(seq: int) -> str:
    return f"record {seq}" if seq > 0 else "the start of the log"


def _deleted(first: int, last: int, evidence: str) -> Finding:
    which = f"record {first} was" if first == last else f"records {first} to {last} were"
    return Finding(Tampering.DELETED, first, f"{which} deleted: {evidence}.")


def _original_seq(entry: ChainEntry) -> int | None:
    """The higher sequence number a renumbered record was written with, found by its hash; None if none."""
    return next((seq for seq in range(entry.seq + 1, entry.seq + _RENUMBER_SEARCH + 1) if _hashes_as(entry, seq)), None)


def _hashes_as(entry: ChainEntry, seq: int) -> bool:
    """Whether the entry's stored hash is that of its contents written as record `seq`."""
    return _content_hash({**entry.content, "seq": seq}) == entry.hash


def _content_hash(content: dict[str, Any]) -> str | None:
    """The chain hash of a record's contents as stored; None when they hold a value JSON cannot (SQLite lets a
    text column hold a BLOB), which SafeDB never writes."""
    try:
        return chain_hash(content)
    except (TypeError, ValueError, RecursionError):  # RecursionError: `changes` nested deeper than JSON writes
        return None
