"""Binding an approval to exactly one statement, classification and client, for a limited time (the audit
log makes it count once)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass

from safedb.db.backend import Bounds
from safedb.sql.classification import Classification

_VERSION = 4
"""Tickets of an earlier version (without `rows_shown`, `drops_shown` or `row_changes_shown`, its `bounds`) are not
ours: their question is asked again."""


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
    bounds: Bounds
    """What the question showed of its impact preview, which an approval holds the statement to."""

    @classmethod
    def issue(
        cls,
        classification: Classification,
        ttl: float,
        caller: str,
        bounds: Bounds,
    ) -> ApprovalTicket:
        return cls(
            id=uuid.uuid4().hex,
            statement=digest(classification.statement),
            changes=changes_digest(classification),
            caller=digest(caller),
            expires=time.time() + ttl,
            bounds=bounds,
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
        # Field by field rather than `dataclasses.asdict`, which copies each value recursively (three times slower).
        fields = {
            "v": _VERSION,
            "id": self.id,
            "statement": self.statement,
            "changes": self.changes,
            "caller": self.caller,
            "expires": self.expires,
            "rows_shown": self.bounds.rows,
            "drops_shown": self.bounds.drops,
            "row_changes_shown": self.bounds.row_changes,
        }
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> ApprovalTicket | None:
        """The ticket in `text`, or None when there is none or it is not one of ours."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if data.pop("v") != _VERSION:
                return None
            rows_shown = data["rows_shown"]
            drops_shown = data["drops_shown"]
            row_changes_shown = data["row_changes_shown"]
            return cls(
                id=str(data["id"]),
                statement=str(data["statement"]),
                changes=str(data["changes"]),
                caller=str(data["caller"]),
                expires=float(data["expires"]),
                bounds=Bounds(
                    rows=None if rows_shown is None else int(rows_shown),
                    drops=None if drops_shown is None else tuple(str(drop) for drop in drops_shown),
                    row_changes=None if row_changes_shown is None else tuple(str(row) for row in row_changes_shown),
                ),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def changes_digest(classification: Classification) -> str:
    """What the statement does, which code it runs (a trigger or a default added since is a new question, and so is
    a function replaced that the code calls), and which tables its names meant (another table of the same name is a
    new question)."""
    lines = sorted(classification.change_lines)
    lines += [f"runs {name}" for name in classification.runs]
    lines += [f"stored code {call}" for call in classification.stored_code]
    lines += [f"cascade {line}" for line in classification.cascades]
    lines += [f"{name} -> {meant}" for name, meant in sorted(classification.resolved, key=str)]
    if classification.code_version is not None:
        lines.append(f"code version {classification.code_version}")
    return digest("\n".join(lines))
