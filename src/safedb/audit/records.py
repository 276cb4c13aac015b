"""A stored audit record: an event with its sequence number, time and place in the hash chain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from safedb.audit.chain import CONTENT_FIELDS, chain_hash
from safedb.audit.errors import UnreadableRecord
from safedb.audit.events import AuditDecision, AuditEvent


def format_time(moment: datetime) -> str:
    """UTC, fixed width (`2025-06-01T12:00:00.000000Z`), so text order is time order."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # isoformat, not strftime: several times faster, and its year always has four digits.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(text: str) -> str:
    """An ISO 8601 date or time (without a zone it is UTC), in the stored format; ValueError if it is not one."""
    return format_time(datetime.fromisoformat(text.strip()))


def storable(text: str) -> str:
    """Text SQLite can store as UTF-8: lone surrogates (possible in JSON input) become `\\udXXX` escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class AuditRecord:
    seq: int
    time: str
    decision: AuditDecision
    request_id: str
    target: str
    caller: str | None
    sql: str
    classification: str
    changes: tuple[str, ...]
    justification: str | None
    environment: str | None
    rows_affected: int | None
    error: str | None
    prev_hash: str
    hash: str

    @classmethod
    def chained(cls, event: AuditEvent, *, seq: int, time: str, prev_hash: str) -> AuditRecord:
        """The record for `event` at position `seq` after the record whose hash is `prev_hash`."""

        def text(value: str | None) -> str | None:
            return None if value is None else storable(value)

        content: dict[str, Any] = {
            "seq": seq,
            "time": time,
            "decision": AuditDecision(event.decision).value,
            "request_id": storable(event.request_id),
            "target": storable(event.target),
            "caller": text(event.caller),
            "sql": storable(event.sql),
            "classification": storable(event.classification),
            "changes": [storable(change) for change in event.changes],
            "justification": text(event.justification),
            "environment": text(event.environment),
            "rows_affected": None if event.rows_affected is None else int(event.rows_affected),
            "error": text(event.error),
            "prev_hash": prev_hash,
        }
        return cls.from_content(content, chain_hash(content))

    @classmethod
    def from_content(cls, content: dict[str, Any], hash: str) -> AuditRecord:
        """Rebuild a record from its stored content; UnreadableRecord when a field has the wrong shape."""
        try:
            changes = content["changes"]
            if isinstance(changes, str):
                changes = json.loads(changes)
            if not isinstance(changes, list) or not all(isinstance(change, str) for change in changes):
                raise TypeError("changes is not a list of strings")
            rows = content["rows_affected"]
            if rows is not None and not isinstance(rows, int):
                raise TypeError("rows_affected is not an integer")
            return cls(
                seq=int(content["seq"]),
                time=_text(content["time"]),
                decision=AuditDecision(content["decision"]),
                request_id=_text(content["request_id"]),
                target=_text(content["target"]),
                caller=_optional_text(content["caller"]),
                sql=_text(content["sql"]),
                classification=_text(content["classification"]),
                changes=tuple(changes),
                justification=_optional_text(content["justification"]),
                environment=_optional_text(content["environment"]),
                rows_affected=rows,
                error=_optional_text(content["error"]),
                prev_hash=_text(content["prev_hash"]),
                hash=_text(hash),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UnreadableRecord(
                f"Audit record {content.get('seq')} cannot be read ({exc}); run `safedb audit verify`."
            ) from None

    def content(self) -> dict[str, Any]:
        """The fields the hash covers, in display order."""
        values: dict[str, Any] = {name: getattr(self, name) for name in CONTENT_FIELDS}
        values["decision"] = self.decision.value
        values["changes"] = list(self.changes)
        return values

    def to_dict(self) -> dict[str, Any]:
        """Every field, the hash last: the shape of one exported JSON line."""
        return {**self.content(), "hash": self.hash}


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, found {type(value).__name__}")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)
