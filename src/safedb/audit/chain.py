"""The hash chain: each record's hash covers its own fields and the hash of the record before it.

    hash(N) = SHA-256( canonical JSON of record N's fields, including seq and prev_hash = hash(N-1) )

The first record chains from `GENESIS_HASH`. Canonical JSON: keys sorted, no spaces, ASCII only
(anything else escaped), so the same record always hashes to the same value on every platform.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

GENESIS_HASH = "0" * 64
"""The `prev_hash` of the first record."""

CONTENT_FIELDS = (
    "seq",
    "time",
    "decision",
    "request_id",
    "target",
    "caller",
    "sql",
    "classification",
    "changes",
    "justification",
    "environment",
    "rows_affected",
    "error",
    "prev_hash",
)
"""The fields a record's hash covers, in the order records show them; the hash itself comes last."""


def canonical_json(content: Mapping[str, object]) -> bytes:
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def chain_hash(content: Mapping[str, object]) -> str:
    """The SHA-256 (hex) of one record's content, which includes the previous record's hash."""
    return hashlib.sha256(canonical_json(content)).hexdigest()
