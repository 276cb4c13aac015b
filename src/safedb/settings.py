"""One frozen settings object, built once by the CLI from options, SAFEDB_* variables or a TOML file."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import platformdirs

from safedb.db.backend import QueryLimits
from safedb.sql.classification import ChangeCategory


class Transport(StrEnum):
    HTTP = "http"
    STDIO = "stdio"


class Environment(StrEnum):
    """What a target is. Answers about a production target must say Production."""

    DEVELOPMENT = "development"
    STAGING = "staging"
    PRODUCTION = "production"


class Channel(StrEnum):
    """How a target asks for approval."""

    FORM = "form"
    """A form elicitation answered at the MCP client."""
    WEB = "web"
    """A URL-mode elicitation: an approver decides on SafeDB's own approval page."""


@dataclass(frozen=True)
class Approver:
    """A person who may decide on the approval page. `password_hash` comes from `safedb approver-hash`."""

    name: str
    password_hash: str


def default_data_dir() -> Path:
    return platformdirs.user_data_path("safedb", appauthor=False)


ALL_CATEGORIES = frozenset(ChangeCategory)
ALWAYS_REFUSED = frozenset({ChangeCategory.EXTENSION})
"""Refused by the deny list whatever a policy says (docs/safety.md, section 3)."""


@dataclass(frozen=True)
class Policy:
    """How one target treats statements that change something."""

    ask: frozenset[ChangeCategory] = ALL_CATEGORIES - {ChangeCategory.EXTENSION}
    """Kinds of change that run only after a person approves them."""
    refuse: frozenset[ChangeCategory] = ALWAYS_REFUSED
    """Kinds of change refused outright, whatever anyone answers (`ALWAYS_REFUSED` are, in any case). A kind in
    neither set runs without asking."""
    min_justification: int = 10
    """Characters a justification needs when the answer says Production."""
    type_target_name: bool = False
    """The form also asks the person to type the target's name, which must match."""
    approval_timeout: float = 600.0
    """Seconds a question waits for a person; unanswered by then, it counts as cancelled."""
    channel: Channel = Channel.FORM
    allowed_paths: tuple[Path, ...] = ()
    """Directories ATTACH and VACUUM INTO may use; outside them both are refused outright."""

    def describe(self) -> str:
        """One line such as `asks at the client before: data change; refused: extension loading`."""
        refused = self.refuse | ALWAYS_REFUSED
        asked = sorted(str(c) for c in self.ask - refused)
        free = sorted(str(c) for c in ALL_CATEGORIES - self.ask - refused)
        where = "on the approval page" if self.channel is Channel.WEB else "at the client"
        parts = [f"asks {where} before: {', '.join(asked)}" if asked else "asks before nothing"]
        parts.append(f"refused: {', '.join(sorted(str(c) for c in refused))}")
        if free:
            parts.append(f"runs without asking: {', '.join(free)}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Target:
    """One database SafeDB serves, with its safety policy."""

    name: str = "default"
    database: str | None = None
    """An SQLite file path or a postgresql:// URL (the read-only role's); None serves the demo database."""
    writer_database: str | None = None
    """PostgreSQL only: the URL of the role approved statements run as; None uses `database`."""
    environment: Environment = Environment.DEVELOPMENT
    policy: Policy = field(default_factory=Policy)

    def safety_mode(self) -> str:
        return f"{self.name} ({self.environment}): {self.policy.describe()}"


@dataclass(frozen=True)
class Settings:
    """Everything `safedb serve` can be told; each field is documented where it is declared."""

    targets: tuple[Target, ...] = (Target(),)
    data_dir: Path = field(default_factory=default_data_dir)
    transport: Transport = Transport.HTTP
    host: str = "127.0.0.1"
    port: int = 8000
    limits: QueryLimits = field(default_factory=QueryLimits)
    text_rows: int = 50
    """Rows shown in the text table of a result; every returned row is in the structured content."""
    readers: int = 4
    """Read-only connections per target, so slow reads do not hold up others."""
    progress_interval: float = 10.0
    """Seconds between progress notifications while a person decides (handshake era)."""
    request_state_keys: tuple[str, ...] = ()
    """Secrets (32+ bytes each) that seal 2026-07-28 requestState; the first seals, all unseal. Processes
    that share them and the audit log can finish each other's approval rounds. Empty: a per-process key."""
    audit_db: str | Path | None = None
    """The audit log: an SQLite file, or a postgresql:// URL (a dedicated schema); None: a file in `data_dir`."""
    approvers: tuple[Approver, ...] = ()
    """Who may decide on the approval page (targets whose channel is `web`)."""
    public_url: str | None = None
    """The server's address as approvers' browsers reach it, for approval links; None: as the client called it."""
    max_sessions: int = 10_000
    """Handshake-era HTTP sessions open at once; past it, new ones are refused until one closes."""
    session_idle_timeout: float = 1800.0
    """Seconds a handshake-era HTTP session may sit with no request before it is closed (a question waiting for a
    person is a request); its client then opens a new one."""

    @property
    def audit_location(self) -> str | Path:
        """Where the audit log is: a postgresql:// URL, or an SQLite file path."""
        if isinstance(self.audit_db, str) and self.audit_db.lower().startswith(("postgresql://", "postgres://")):
            return self.audit_db
        return Path(self.audit_db) if self.audit_db else self.data_dir / "audit.db"
