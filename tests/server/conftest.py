"""Fixtures shared by the server tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ServerProcess, safedb_serve


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    """`safedb serve` over HTTP on an empty database of the test's own (its audit log beside it)."""
    database = tmp_path / "app.db"
    database.touch()
    with safedb_serve(database) as server:
        yield server, database
