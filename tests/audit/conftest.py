from __future__ import annotations

from pathlib import Path

import pytest

from tests.audit.stores import AuditLog, PostgresLog, SqliteLog, new_schema
from tests.conftest_postgres import fresh_database
from tests.postgres_server import PostgresServer


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    """Where a test's audit log lives (not created yet)."""
    return tmp_path / "audit" / "audit.db"


@pytest.fixture(scope="session")
def audit_database(postgres_cluster: PostgresServer) -> str:
    """One database (owned by the writer role) for the audit tests; each test uses a schema of its own."""
    return fresh_database(postgres_cluster)


@pytest.fixture
def postgres_log(postgres_cluster: PostgresServer, audit_database: str) -> PostgresLog:
    """An audit log in a new schema (not created yet), appended to as the writer role."""
    return PostgresLog(postgres_cluster, audit_database, new_schema())


@pytest.fixture(params=["sqlite", "postgres"])
def audit_log(request: pytest.FixtureRequest, audit_path: Path) -> AuditLog:
    """A test's audit log (not created yet), in each kind of store in turn."""
    if request.param == "sqlite":
        return SqliteLog(audit_path)
    log: PostgresLog = request.getfixturevalue("postgres_log")
    return log
