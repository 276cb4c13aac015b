"""The PostgreSQL backend (psycopg 3, async, pooled)."""

from safedb.db.postgres.backend import PostgresDatabase

__all__ = ["PostgresDatabase"]
