"""The TOML configuration file: named targets with their policies, server options and limits.

Parsed strictly: an unknown key or a value of the wrong type is an error naming where it is, never
ignored. Relative paths are taken from the file's own directory. docs/configuration.md documents every
setting (a test checks that it does).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from safedb.approval.verification import JUSTIFICATION_MAX_CHARS, TARGET_NAME_MAX_CHARS
from safedb.audit.open import is_postgres_url
from safedb.db.backend import QueryLimits
from safedb.errors import ConfigurationError
from safedb.settings import Approver, Channel, Environment, Policy, Settings, Target, Transport
from safedb.sql.classification import ChangeCategory
from safedb.web.passwords import is_password_hash

CategoryName = Literal["data", "schema", "database", "extension", "unknown"]

CATEGORY_NAMES: dict[str, ChangeCategory] = {
    "data": ChangeCategory.DATA,
    "schema": ChangeCategory.SCHEMA,
    "database": ChangeCategory.DATABASE,
    "extension": ChangeCategory.EXTENSION,
    "unknown": ChangeCategory.UNKNOWN,
}

# No `inf` or `nan` (TOML has both): every number of the file is a count, a size or seconds.
_TARGET_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{TARGET_NAME_MAX_CHARS}}}")
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class PolicySection(BaseModel):
    model_config = _STRICT

    ask: list[CategoryName] = ["data", "schema", "database", "unknown"]
    refuse: list[CategoryName] = ["extension"]
    # No more than an answer may give: above it, no Production change could ever be approved.
    min_justification: int = Field(default=10, ge=0, le=JUSTIFICATION_MAX_CHARS)
    type_target_name: bool = False
    approval_timeout: float = Field(default=600.0, ge=1)  # as --approval-timeout
    channel: Literal["form", "web"] = "form"
    allowed_paths: list[str] = []


class ApproverSection(BaseModel):
    model_config = _STRICT

    name: str = Field(min_length=1)
    password_hash: str


class TargetSection(BaseModel):
    model_config = _STRICT

    database: str | None = Field(default=None, min_length=1)
    writer_database: str | None = Field(default=None, min_length=1)
    environment: Literal["development", "staging", "production"] = "development"
    policy: PolicySection = PolicySection()


class ServerSection(BaseModel):
    model_config = _STRICT

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    transport: Literal["http", "stdio"] = "http"
    data_dir: str | None = None
    audit_db: str | None = None
    request_state_keys: list[str] = []
    text_rows: int = Field(default=50, ge=0)
    readers: int = Field(default=4, ge=1)
    progress_interval: float = Field(default=10.0, gt=0)
    public_url: str | None = None
    approvers: list[ApproverSection] = []
    max_sessions: int = Field(default=10_000, ge=1)
    session_idle_timeout: float = Field(default=1800.0, gt=0, allow_inf_nan=False)


class LimitsSection(BaseModel):
    model_config = _STRICT

    max_rows: int = Field(default=500, ge=1)
    max_result_bytes: int = Field(default=512 * 1024, ge=1024)
    statement_timeout: float = Field(default=30.0, ge=0.1)  # as --statement-timeout
    preview_timeout: float = Field(default=5.0, ge=0.1)


class ConfigFile(BaseModel):
    model_config = _STRICT

    server: ServerSection = ServerSection()
    limits: LimitsSection = LimitsSection()
    targets: dict[str, TargetSection] = Field(min_length=1)


def load_settings(path: Path) -> Settings:
    """Settings from the TOML file at `path`. Raises ConfigurationError with a precise message."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"Cannot read the configuration file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # TOML files are UTF-8; an editor may have saved it in another encoding
        raise ConfigurationError(
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start}): save it as UTF-8."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from None
    try:
        config = ConfigFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise ConfigurationError(f"{path}: {problems}") from None
    return _settings(config, path.parent.resolve())


def _problem(error: ErrorDetails) -> str:
    if error["loc"] == ("targets",) and error["type"] in ("missing", "too_short"):
        # pydantic says "Field required", or that a dictionary needs an item: name what is missing instead.
        return 'targets: the file names no target to serve; add one, such as [targets.main] with database = "app.db"'
    return f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"


def _settings(config: ConfigFile, base: Path) -> Settings:
    server, limits = config.server, config.limits
    for name in config.targets:
        # ASCII only: a name of Cyrillic look-alikes, or of a letter that draws blank (U+3164), reads as another.
        if not _TARGET_NAME.fullmatch(name):
            raise ConfigurationError(
                f"targets.{ascii(name)[1:-1][:100]}: a target name uses only ASCII letters, digits, '-' and '_', "
                f"at most {TARGET_NAME_MAX_CHARS} of them"
            )
    for key in server.request_state_keys:
        if len(key.encode()) < 32:
            raise ConfigurationError("server.request_state_keys: each key must be at least 32 bytes")
    for approver in server.approvers:
        if ":" in approver.name:  # HTTP Basic sends `name:password`, split at the first colon
            raise ConfigurationError(
                f"server.approvers: the name {approver.name!r} contains ':', where a browser's sign-in ends the name: "
                "choose a name without one"
            )
        if not is_password_hash(approver.password_hash):
            raise ConfigurationError(
                f"server.approvers: the password_hash of {approver.name!r} is not one `safedb approver-hash` made"
            )
    if server.public_url is not None:
        _check_public_url(server.public_url)
    targets = tuple(_target(name, section, base) for name, section in config.targets.items())
    if any(t.policy.channel is Channel.WEB for t in targets):
        if not server.approvers:
            raise ConfigurationError('A target approves on the web page (channel = "web"): configure server.approvers')
        if server.transport != "http":
            raise ConfigurationError('The approval page (channel = "web") needs server.transport = "http"')
    settings = Settings(
        targets=targets,
        transport=Transport(server.transport),
        host=server.host,
        port=server.port,
        audit_db=_audit_location(server.audit_db, base),
        request_state_keys=tuple(server.request_state_keys),
        text_rows=server.text_rows,
        readers=server.readers,
        progress_interval=server.progress_interval,
        limits=QueryLimits(
            max_rows=limits.max_rows,
            max_bytes=limits.max_result_bytes,
            statement_timeout=limits.statement_timeout,
            preview_timeout=limits.preview_timeout,
        ),
        approvers=tuple(Approver(a.name, a.password_hash) for a in server.approvers),
        public_url=server.public_url,
        max_sessions=server.max_sessions,
        session_idle_timeout=server.session_idle_timeout,
    )
    return dataclasses.replace(settings, data_dir=_path(server.data_dir, base)) if server.data_dir else settings


def _check_public_url(url: str) -> None:
    """Approval links are `url` followed by `/approvals/...`: they must be web addresses a browser can open."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number from 0 to 65535 raises here
    except ValueError as exc:
        raise ConfigurationError(f"server.public_url: {url!r} is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"server.public_url: {url!r} is not an http:// or https:// URL with a host")
    if any(character.isspace() or not character.isprintable() for character in url):
        raise ConfigurationError(f"server.public_url: {url!r} contains spaces or control characters")
    if parts.query or parts.fragment:  # the links' path would land inside them
        raise ConfigurationError(f"server.public_url: {url!r} has a query or fragment; give the address only")


def _target(name: str, section: TargetSection, base: Path) -> Target:
    policy = section.policy
    # Refused wins over asked (`ask`'s default lists kinds that `refuse` alone may take); given both, say so.
    given_both = {"ask", "refuse"} <= policy.model_fields_set
    if given_both and (both := sorted(set(policy.ask) & set(policy.refuse))):
        raise ConfigurationError(
            f"targets.{name}.policy: {', '.join(both)} is listed in both ask and refuse: list each kind in one of them"
        )
    database = section.database
    if database is not None and "://" not in database:
        database = str(_path(database, base))
    return Target(
        name=name,
        database=database,
        writer_database=section.writer_database,
        environment=Environment(section.environment),
        policy=Policy(
            ask=frozenset(CATEGORY_NAMES[c] for c in policy.ask),
            refuse=frozenset(CATEGORY_NAMES[c] for c in policy.refuse),
            min_justification=policy.min_justification,
            type_target_name=policy.type_target_name,
            approval_timeout=policy.approval_timeout,
            channel=Channel(policy.channel),
            allowed_paths=tuple(_path(p, base) for p in policy.allowed_paths),
        ),
    )


def _audit_location(value: str | None, base: Path) -> str | Path | None:
    if value is None:
        return None
    return value if is_postgres_url(value) else _path(value, base)


def _path(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()
