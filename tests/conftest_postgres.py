"""The session-wide PostgreSQL server fixture, shared by the suites that need one.

Import `postgres_cluster` into a conftest.py to use it. Without the PostgreSQL binaries the tests that
use it are skipped, unless SAFEDB_REQUIRE_ALL=1 (CI sets it): then they fail. A server that is
installed but does not start always fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence

import pytest

from tests.postgres_server import PostgresServer, PostgresUnavailable, postgres_server

REQUIRE_ALL = "SAFEDB_REQUIRE_ALL"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresServer]:
    try:
        with postgres_server() as server:
            yield server
    except PostgresUnavailable as exc:
        missing_postgres(exc)


def missing_postgres(exc: PostgresUnavailable) -> None:
    """Skip, or fail when the environment requires every suite to run (CI)."""
    if os.environ.get(REQUIRE_ALL) == "1":
        pytest.fail(f"PostgreSQL is required ({REQUIRE_ALL}=1) but not installed: {exc}")
    pytest.skip(f"PostgreSQL is not installed: {exc}")


def fresh_database(server: PostgresServer, setup: Sequence[str] = ()) -> str:
    """A new database owned by the writer role, set up with `setup`; returns its name."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    server.create_database(name, setup)
    return name
