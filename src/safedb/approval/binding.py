"""Binding an approval to exactly one statement, classification and client, for a limited time (the audit
log makes it count once)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import asdict, dataclass

from safedb.sql.classification import Classification


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApprovalTicket:
    """What a pending question is about. Carried (sealed by the SDK) in `requestState` on 2026-07-28."""

    id: str
    statement: str
    """SHA-256 of the statement text."""
    changes: str
    """SHA-256 of what the statement was classified to do, so a changed schema means a new question."""
    caller: str
    """SHA-256 of the client the question was put to; an answer counts only from the same client."""
    expires: float
    """Unix time after which an answer no longer counts."""

    @classmethod
    def issue(cls, classification: Classification, ttl: float, caller: str) -> ApprovalTicket:
        return cls(
            id=uuid.uuid4().hex,
            statement=digest(classification.statement),
            changes=changes_digest(classification),
            caller=digest(caller),
            expires=time.time() + ttl,
        )

    def covers(self, classification: Classification, caller: str) -> bool:
        """True when the ticket was issued for this exact statement, classification and client (expired or not)."""
        return (
            self.statement == digest(classification.statement)
            and self.changes == changes_digest(classification)
            and self.caller == digest(caller)
        )

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires

    def encode(self) -> str:
        return json.dumps({"v": 1, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> ApprovalTicket | None:
        """The ticket in `text`, or None when there is none or it is not one of ours."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if data.pop("v") != 1:
                return None
            return cls(
                id=str(data["id"]),
                statement=str(data["statement"]),
                changes=str(data["changes"]),
                caller=str(data["caller"]),
                expires=float(data["expires"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def changes_digest(classification: Classification) -> str:
    return digest("\n".join(sorted(str(change) for change in classification.changes)))
