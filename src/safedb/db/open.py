"""Open the database a `--database` value names: an SQLite file path or a postgresql:// URL."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from safedb.db.backend import Database, QueryLimits
from safedb.db.sqlite import SqliteDatabase
from safedb.errors import ConfigurationError, DatabaseOpenError

logger = logging.getLogger(__name__)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_postgres_url(value: str) -> bool:
    return value.lower().startswith(POSTGRES_SCHEMES)


def open_database(
    url_or_path: str,
    limits: QueryLimits,
    *,
    writer_url: str | None = None,
    readers: int = 4,
    writers: int = 2,
    check: bool = True,
) -> Database:
    """A `SqliteDatabase` for a file path, a `PostgresDatabase` for a postgresql:// URL.

    For PostgreSQL, `url_or_path` is the read-only DSN and `writer_url` (default: the same) the DSN approved
    statements run with. With `check`, both are tried once now (blocking, bounded by the connect timeout) so
    that a wrong URL is a clear error at start-up. Raises DatabaseOpenError or ConfigurationError.
    """
    if is_postgres_url(url_or_path):
        if writer_url is not None and not is_postgres_url(writer_url):
            raise ConfigurationError("The writer URL must be a postgresql:// URL as well.")
        # Imported here: pglast and psycopg cost memory and start-up time that SQLite users need not pay.
        from safedb.db.postgres import PostgresDatabase  # noqa: PLC0415

        if check:
            for dsn in dict.fromkeys((url_or_path, writer_url or url_or_path)):
                check_postgres(dsn)
        return PostgresDatabase(url_or_path, limits, writer_dsn=writer_url, readers=readers, writers=writers)
    if writer_url is not None:
        raise ConfigurationError("A separate writer URL applies to PostgreSQL only.")
    if (scheme := _URL_SCHEME.match(url_or_path)) is not None:
        raise ConfigurationError(
            f"SafeDB serves an SQLite file, given by its path, or PostgreSQL, by a postgresql:// URL; "
            f"{scheme.group(0)}... is neither."
        )
    return SqliteDatabase(Path(url_or_path), limits, readers=readers)


def check_postgres(dsn: str) -> None:
    """Connect once and disconnect; raise DatabaseOpenError (without the password) when that fails."""
    import psycopg  # noqa: PLC0415  (see open_database)

    from safedb.db.postgres.connections import CONNECT_SECONDS, describe_dsn, error_reason  # noqa: PLC0415

    try:
        with psycopg.connect(dsn, connect_timeout=int(CONNECT_SECONDS), autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = error_reason(exc, dsn)
        raise DatabaseOpenError(f"Cannot connect to PostgreSQL as {describe_dsn(dsn)}: {reason}") from exc
