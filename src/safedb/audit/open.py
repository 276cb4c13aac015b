"""Opening the audit log wherever it is kept: a PostgreSQL schema for a postgresql:// URL, else an SQLite file."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from safedb.audit.sqlite_store import SqliteAuditStore
from safedb.audit.store import AuditStore

POSTGRES_SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "safedb_audit"
SCHEMA_PARAMETER = "audit_schema"
"""A query parameter of the URL naming the audit schema (`...?audit_schema=ops_audit`); SafeDB's, not libpq's."""


def is_postgres_url(location: str | Path) -> bool:
    """Whether `location` is a postgresql:// (or postgres://) URL rather than a file path."""
    if not isinstance(location, str):
        return False
    try:
        scheme = urlsplit(location).scheme
    except ValueError:  # a '[' or ']' Python takes for a broken IPv6 address, after a scheme all the same
        scheme = location.partition(":")[0]
    return scheme.lower() in POSTGRES_SCHEMES


def split_audit_url(url: str) -> tuple[str, str]:
    """The connection URL without SafeDB's `audit_schema` parameter, and the schema it names (or the default)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # Python refuses a '[' or ']' outside an IPv6 address (`Invalid IPv6 URL`); libpq takes one in a password,
        # and says in one line what is wrong with the URL when it is wrong.
        return url, DEFAULT_SCHEMA
    parameters = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in parameters if name == SCHEMA_PARAMETER]
    rest = [(name, value) for name, value in parameters if name != SCHEMA_PARAMETER]
    return urlunsplit(parts._replace(query=urlencode(rest))), (schemas[-1] if schemas else DEFAULT_SCHEMA)


def open_audit_store(location: str | Path, *, readonly: bool = False) -> AuditStore:
    """The audit log at `location`: a PostgreSQL URL (tables in the schema `audit_schema`, default
    `safedb_audit`) or an SQLite file path. Created unless `readonly`; DatabaseOpenError when it cannot be used.
    """
    if is_postgres_url(location):
        # Imported here: psycopg costs memory and start-up time that SQLite deployments need not pay.
        from safedb.audit.postgres_store import PostgresAuditStore  # noqa: PLC0415

        dsn, schema = split_audit_url(str(location))
        return PostgresAuditStore.open(dsn, schema=schema, readonly=readonly)
    return SqliteAuditStore.open(Path(location), readonly=readonly)
