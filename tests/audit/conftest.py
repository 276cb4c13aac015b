from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    """Where a test's audit log lives (not created yet)."""
    return tmp_path / "audit" / "audit.db"
