"""What `safedb serve` does once its options are parsed: settle the settings, open, serve, close."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import ipaddress
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import anyio

from safedb import __version__
from safedb.audit import AuditStore, open_audit_store
from safedb.config_file import load_settings
from safedb.db.backend import Database
from safedb.db.demo import ensure_demo_database
from safedb.db.open import open_database
from safedb.errors import ConfigurationError
from safedb.server import app
from safedb.settings import Policy, Settings, Target, Transport

logger = logging.getLogger(__name__)

# Options that describe the one target served without a configuration file, as a person sets them.
TARGET_OPTIONS = {
    "database": ("--database (SAFEDB_DATABASE)", "targets.NAME.database"),
    "writer_database": ("--writer-database (SAFEDB_WRITER_DATABASE)", "targets.NAME.writer_database"),
    "allowed_paths": ("--allow-path (SAFEDB_ALLOWED_PATHS)", "targets.NAME.policy.allowed_paths"),
    "approval_timeout": ("--approval-timeout (SAFEDB_APPROVAL_TIMEOUT)", "targets.NAME.policy.approval_timeout"),
}
"""Options of the one target served without a configuration file: how each is spelled, and its key in a file."""
LIMIT_OPTIONS = {"max_rows": "max_rows", "max_result_bytes": "max_bytes", "statement_timeout": "statement_timeout"}
SERVER_OPTIONS = frozenset({"transport", "host", "port", "data_dir", "audit_db", "request_state_keys"})


def settings_for(config: Path | None, options: Mapping[str, Any], given: frozenset[str]) -> Settings:
    """Settings from the configuration file (when there is one) and the command-line options.

    `given` names the options set on the command line or through the environment: with a file, they
    override its server settings, and target options are an error (targets live in the file).
    """
    if config is None:
        base = Settings(targets=(_single_target(options),))
        given = given | SERVER_OPTIONS | frozenset(LIMIT_OPTIONS)
    else:
        misplaced = sorted(TARGET_OPTIONS[name] for name in given & TARGET_OPTIONS.keys())
        if misplaced:
            raise ConfigurationError(
                f"{', '.join(flag for flag, _ in misplaced)} cannot be combined with --config: set "
                f"{', '.join(key for _, key in misplaced)} in the configuration file instead."
            )
        base = load_settings(config)
    server = {name: options[name] for name in SERVER_OPTIONS & given if options[name] not in (None, ())}
    if "transport" in server:
        server["transport"] = Transport(server["transport"])
    limits = {field: options[name] for name, field in LIMIT_OPTIONS.items() if name in given}
    return dataclasses.replace(base, **server, limits=dataclasses.replace(base.limits, **limits))


def _single_target(options: Mapping[str, Any]) -> Target:
    database: str | None = options["database"]
    policy = Policy(
        approval_timeout=options["approval_timeout"],
        allowed_paths=tuple(Path(p).resolve() for p in options["allowed_paths"]),
    )
    return Target(
        name=target_name(database), database=database, writer_database=options["writer_database"], policy=policy
    )


def target_name(database: str | None) -> str:
    """A short name for the only target: `demo`, the SQLite file's stem, or the PostgreSQL database's name."""
    if database is None:
        return "demo"
    try:
        stem = urlsplit(database).path.rsplit("/", 1)[-1] if "://" in database else Path(database).stem
    except ValueError:  # `Invalid IPv6 URL`, for a stray '[' or ']': connecting says what is wrong, in one line
        stem = ""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_") or "default"


def run(settings: Settings, announce: Callable[[str], None]) -> None:
    """Open every target and the audit log, listen, announce the safety modes, serve until stopped."""
    databases = open_databases(settings)
    try:
        audit = open_audit_store(settings.audit_location)
        listener = _listen(settings) if settings.transport is Transport.HTTP else None
    except BaseException:
        anyio.run(_close, databases)
        raise
    # Ctrl-C and SIGTERM (a service manager stopping the server) end it alike, once `app.serve` has closed the
    # databases and the audit log. Python's default action on SIGTERM ends the process before that (uvicorn catches
    # it, shuts down, and raises it again once done); asyncio's own on SIGINT cancels the server, which over stdio
    # then waits for a line of input that a terminal may never send.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        banner = functools.partial(_announce, settings, databases, audit, listener, announce)
        anyio.run(app.serve, settings, databases, audit, listener, banner)
    except KeyboardInterrupt:
        if listener is None:
            # Everything is closed, but over stdio a worker thread may still wait for a line of standard input (a
            # terminal sends none), and Python would wait for that thread before it exits.
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(0)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _announce(
    settings: Settings,
    databases: Mapping[str, Database],
    audit: AuditStore,
    listener: socket.socket | None,
    announce: Callable[[str], None],
) -> None:
    """The banner: each target's safety mode, warnings, the audit log, and where the server listens."""
    where = "over stdio" if listener is None else f"at {_endpoint(settings.host, listener.getsockname()[1])}"
    for target in settings.targets:
        announce(f"target {target.safety_mode()}")
        for path in target.policy.allowed_paths:
            if not path.is_dir():  # a typo would otherwise show only when a statement is refused
                announce(f"warning: {path}, allowed for ATTACH and VACUUM INTO on {target.name}, is not a directory")
    if listener is not None and (warning := exposure_warning(settings.host)) is not None:
        announce(warning)
    labels = ", ".join(database.label for database in databases.values())
    announce(f"audit log: {audit.label}")
    announce(f"SafeDB {__version__} serving {labels} {where}")


def exposure_warning(host: str) -> str | None:
    """A warning when the HTTP transport listens beyond this machine: the MCP endpoint asks for no credentials, and
    through it a client answers its own form questions."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        loopback = False
    if loopback:
        return None
    return (
        f"warning: listening on {host}, beyond this machine. The MCP endpoint asks for no credentials: whoever "
        "reaches it can read, and approve their own changes on targets whose channel is form. Listen on 127.0.0.1, "
        'or put SafeDB behind a proxy that authenticates and give production targets channel = "web".'
    )


def _refuse_serving_the_audit_log(location: str, audit: str | Path) -> None:
    """ConfigurationError when a target's database is the SQLite audit log: served, its records would be an agent's
    to read (every statement and justification logged), and the log must stay out of its reach."""
    if isinstance(audit, str) or "://" in location:
        return
    served, log = Path(location), Path(audit)
    with contextlib.suppress(OSError):
        if served.resolve() == log.resolve() or (served.exists() and log.exists() and served.samefile(log)):
            raise ConfigurationError(
                f"{location} is the audit log: SafeDB does not serve its own audit log as a database, where an agent "
                "could read every statement and justification logged. Serve another file, or keep the log elsewhere "
                "(--audit-db)."
            )


def open_databases(settings: Settings) -> dict[str, Database]:
    databases: dict[str, Database] = {}
    try:
        for target in settings.targets:
            location = target.database or str(ensure_demo_database(settings.data_dir))
            _refuse_serving_the_audit_log(location, settings.audit_location)
            databases[target.name] = open_database(
                location, settings.limits, writer_url=target.writer_database, readers=settings.readers
            )
    except BaseException:
        anyio.run(_close, databases)
        raise
    return databases


def _endpoint(host: str, port: int) -> str:
    """The MCP endpoint's URL, an IPv6 address in brackets (`http://[::1]:8000/mcp`) as a URL needs it."""
    return f"http://[{host}]:{port}/mcp" if ":" in host and not host.startswith("[") else f"http://{host}:{port}/mcp"


def _listen(settings: Settings) -> socket.socket:
    try:
        return app.bind(settings.host, settings.port)
    except OSError as exc:
        hint = " (another program listens there: give another --port)" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigurationError(f"Cannot listen on {settings.host}:{settings.port}: {exc.strerror}{hint}") from None


async def _close(databases: Mapping[str, Database]) -> None:
    for database in databases.values():
        await database.aclose()
