"""Elicitation servers built on other stacks than SafeDB's, each in the environment it needs (installed on first
use under `.cache/interop/`, as the interoperability clients are), started as processes of their own.

Set SAFEDB_REQUIRE_ALL=1 (CI does) to make an install failure a test failure rather than a skip.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import serving_process
from tests.interop.environments import ClientUnavailable, node_project, python_environment

HERE = Path(__file__).resolve().parent
_LISTENING = re.compile(r"listening at (http://\S+/mcp)")
_available: dict[str, list[str] | ClientUnavailable] = {}


def ts_sdk_server() -> list[str]:
    """The command of `ts_sdk_server.mjs` (TypeScript SDK 1.32.2); add `--port 0` or `--stdio`."""

    def install() -> list[str]:
        project = node_project("ts-sdk-server-1.32.2", "@modelcontextprotocol/sdk@1.32.2", "zod@4.6.7")
        return [str(project.node), str(_staged(project.directory, "ts_sdk_server.mjs"))]

    return _installed("ts-sdk", install)


def ts_sdk2_server() -> list[str]:
    """The command of `ts_sdk2_server.mjs` (TypeScript SDK 2.4.0, both eras); add `--port 0` or `--stdio`."""

    def install() -> list[str]:
        project = node_project("ts-sdk-server-2.4.0", "@modelcontextprotocol/server@2.4.0", "zod@4.6.7")
        return [str(project.node), str(_staged(project.directory, "ts_sdk2_server.mjs"))]

    return _installed("ts-sdk2", install)


def mcp_v1_server() -> list[str]:
    """The command of `mcp_v1_server.py` (Python SDK 1.30.0, FastMCP); add `--port 0` or `--stdio`."""
    return _installed(
        "mcp-v1",
        lambda: [str(python_environment("mcp-1.30.0", "mcp==1.30.0")), str(HERE / "mcp_v1_server.py")],
    )


@contextmanager
def serving(command: list[str]) -> Iterator[str]:
    """Serve `command` over Streamable HTTP on a free loopback port; yield its URL; always stop it."""
    with serving_process([*command, "--port", "0"], ready=_LISTENING) as server:
        yield server.url


def _staged(directory: Path, name: str) -> Path:
    """Copy the script `name` into the npm project: ES modules resolve packages from the importing file's
    directory, so the script runs from inside the project."""
    script = directory / name
    source = (HERE / name).read_text()
    if not script.exists() or script.read_text() != source:
        staged = script.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(source)
        staged.replace(script)
    return script


def _installed(key: str, install: Callable[[], list[str]]) -> list[str]:
    if key not in _available:
        try:
            _available[key] = install()
        except ClientUnavailable as exc:
            _available[key] = exc
    found = _available[key]
    if isinstance(found, ClientUnavailable):
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail(f"the {key} server is required (SAFEDB_REQUIRE_ALL=1) but unavailable: {found}")
        pytest.skip(f"the {key} server is unavailable: {found}")
    return found
