"""Errors of the audit log. Both are SafeDBErrors: their messages are safe to show."""

from __future__ import annotations

from safedb.errors import SafeDBError


class AuditWriteFailed(SafeDBError):
    """A record could not be appended. Callers fail closed: without a record, nothing runs."""


class QuestionNotRecorded(SafeDBError):
    """An answer to a question the log does not hold: asked by a server that keeps another log (one that shares
    only the request-state key), or its record was lost. It does not count: nothing runs."""

    def __init__(self) -> None:
        super().__init__(
            "This answer is to a question this server has no record of asking (its audit log does not hold it): "
            "it was asked by another server. Nothing was run; call the tool again to ask anew."
        )


class UnreadableRecord(SafeDBError):
    """A stored record does not have the shape SafeDB writes: it was altered outside SafeDB."""


class AuditUnreadable(SafeDBError):
    """The log's file could not be read (damaged on the disk, or not an SQLite file past its first page)."""
