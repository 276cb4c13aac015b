from __future__ import annotations

from pathlib import Path

import pytest

from safedb.db.demo import ensure_demo_database

# One PostgreSQL server for the whole session (`postgres_cluster`), shared by every suite that needs it.
pytest_plugins = ["tests.conftest_postgres"]


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    """A fresh copy of the demo database."""
    return ensure_demo_database(tmp_path / "data")


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo database shared by the tests of one module (they keep apart with scratch tables)."""
    return ensure_demo_database(tmp_path_factory.mktemp("shared"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
