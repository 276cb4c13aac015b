"""Isolated environments for the third-party clients, created on first use under `.cache/interop/` (git-ignored).

Every client gets an environment of its own, so their versions never meet: a Python venv per Python client,
an npm project per Node client (Node 24 from PyPI, shared with the conformance suite through
`tests.client.conformance`). An environment is reused while its stamp file names exactly the packages it was
built with; a lock per environment keeps concurrent test runs from building the same one twice.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.client.conformance import HarnessUnavailable, install_node, npm_install
from tests.client.servers import ROOT

CACHE = ROOT / ".cache" / "interop"
_STAMP = ".safedb-interop-installed"


class ClientUnavailable(RuntimeError):
    """A client's environment could not be installed (no registry, no Node, a failed install)."""


@dataclass(frozen=True)
class NodeProject:
    """An npm project directory with its packages installed, and the Node that runs them."""

    node: Path
    directory: Path

    def bin(self, name: str) -> Path:
        return self.directory / "node_modules" / ".bin" / name


def python_environment(name: str, *requirements: str) -> Path:
    """The Python interpreter of a venv at `.cache/interop/NAME` holding exactly `requirements`."""
    venv = CACHE / name
    python = venv / "bin" / "python"
    wanted = "\n".join(requirements) + "\n"
    with _locked(name):
        if _stamp(venv) != wanted:
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(venv)], f"creating the venv {name}")
            _run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
                f"pip install {' '.join(requirements)}",
            )
            (venv / _STAMP).write_text(wanted)
    return python


def node_project(name: str, *packages: str) -> NodeProject:
    """An npm project at `.cache/interop/NAME` holding exactly `packages`, with Node 24."""
    try:
        node_dir = install_node()
    except HarnessUnavailable as exc:
        raise ClientUnavailable(str(exc)) from None
    directory = CACHE / name
    wanted = "\n".join(packages) + "\n"
    with _locked(name):
        if _stamp(directory) != wanted:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            try:
                npm_install(node_dir, directory, *packages)
            except HarnessUnavailable as exc:
                raise ClientUnavailable(str(exc)) from None
            (directory / _STAMP).write_text(wanted)
    return NodeProject(node_dir / "bin" / "node", directory)


def _stamp(directory: Path) -> str | None:
    try:
        return (directory / _STAMP).read_text()
    except OSError:
        return None


def _run(command: list[str], what: str) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=600, check=False, env=os.environ.copy()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClientUnavailable(f"{what} failed: {exc}") from None
    if result.returncode != 0:
        raise ClientUnavailable(f"{what} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Test downloads (Node, npm packages, client venvs); never committed.\n*\n")
    with (CACHE / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
