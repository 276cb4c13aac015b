"""Errors of the audit log. Both are SafeDBErrors: their messages are safe to show."""

from __future__ import annotations

from safedb.errors import SafeDBError


class AuditWriteFailed(SafeDBError):
    """A record could not be appended. Callers fail closed: without a record, nothing runs."""


class UnreadableRecord(SafeDBError):
    """A stored record does not have the shape SafeDB writes: it was altered outside SafeDB."""
