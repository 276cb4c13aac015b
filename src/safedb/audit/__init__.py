"""The audit log: every decision about a statement that could change the database, append-only and hash-chained.

The log is an SQLite file (`SqliteAuditStore`) or a schema in PostgreSQL (`PostgresAuditStore`);
`open_audit_store(path_or_url)` opens either. The server builds `AuditEvent`s and awaits `store.record(event)`;
`verify(store)` checks the chain; `safedb audit` (in `safedb.audit.commands`) lists, verifies and exports.
"""

from safedb.audit.answers import UNASKED_JUSTIFICATION
from safedb.audit.chain import GENESIS_HASH
from safedb.audit.errors import AuditWriteFailed, QuestionNotRecorded, UnreadableRecord
from safedb.audit.events import AuditDecision, AuditEvent, decision_for_verdict
from safedb.audit.export import record_line, write_jsonl
from safedb.audit.open import is_postgres_url, open_audit_store
from safedb.audit.records import AuditRecord, format_time, parse_time
from safedb.audit.sqlite_store import SqliteAuditStore, default_audit_path
from safedb.audit.store import (
    AnswerCheck,
    AuditQuery,
    AuditStore,
    ChainEntry,
    ChainHead,
    ChainSnapshot,
    UnnumberedEntry,
)
from safedb.audit.verification import Finding, Tampering, VerificationReport, verify

__all__ = [
    "GENESIS_HASH",
    "UNASKED_JUSTIFICATION",
    "AnswerCheck",
    "AuditDecision",
    "AuditEvent",
    "AuditQuery",
    "AuditRecord",
    "AuditStore",
    "AuditWriteFailed",
    "ChainEntry",
    "ChainHead",
    "ChainSnapshot",
    "Finding",
    "QuestionNotRecorded",
    "SqliteAuditStore",
    "Tampering",
    "UnnumberedEntry",
    "UnreadableRecord",
    "VerificationReport",
    "decision_for_verdict",
    "default_audit_path",
    "format_time",
    "is_postgres_url",
    "open_audit_store",
    "parse_time",
    "record_line",
    "verify",
    "write_jsonl",
]


def __getattr__(name: str) -> object:
    """`PostgresAuditStore` is imported on first use, so that SQLite deployments do not load psycopg."""
    if name == "PostgresAuditStore":
        from safedb.audit.postgres_store import PostgresAuditStore  # noqa: PLC0415

        return PostgresAuditStore
    raise AttributeError(name)
