"""One frozen settings object, built once by the CLI (options and SAFEDB_* environment variables)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import platformdirs

from safedb.db.backend import QueryLimits


class Transport(StrEnum):
    HTTP = "http"
    STDIO = "stdio"


def default_data_dir() -> Path:
    return platformdirs.user_data_path("safedb", appauthor=False)


@dataclass(frozen=True)
class Settings:
    """Everything `safedb serve` can be told; each field is documented where it is declared."""

    database: str | None = None
    """An SQLite file path or a postgresql:// URL (the read-only role's); None serves the demo database."""
    writer_database: str | None = None
    """PostgreSQL only: the URL of the role approved statements run as; None uses `database`."""
    data_dir: Path = field(default_factory=default_data_dir)
    transport: Transport = Transport.HTTP
    host: str = "127.0.0.1"
    port: int = 8000
    limits: QueryLimits = field(default_factory=QueryLimits)
    text_rows: int = 50
    """Rows shown in the text table of a result; every returned row is in the structured content."""
    readers: int = 4
    """Read-only connections, so slow reads do not hold up others."""
    min_production_justification: int = 10
    approval_timeout: float = 600.0
    """Seconds a question waits for a person; unanswered by then, it counts as cancelled."""
    progress_interval: float = 10.0
    """Seconds between progress notifications while a person decides (handshake era)."""
    request_state_keys: tuple[str, ...] = ()
    """Secrets (32+ bytes each) that seal 2026-07-28 requestState; the first seals, all unseal. Processes
    that share them and the audit log can finish each other's approval rounds. Empty: a per-process key."""
    audit_db: Path | None = None
    """The audit log file; None keeps it in `data_dir`."""
    allowed_paths: tuple[Path, ...] = ()
    """Directories ATTACH and VACUUM INTO may use; outside them both are refused outright."""

    @property
    def audit_path(self) -> Path:
        return self.audit_db or self.data_dir / "audit.db"
