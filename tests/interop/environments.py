"""Isolated environments for the third-party clients, created on first use under `.cache/interop/` (git-ignored).

Every client gets an environment of its own, so their versions never meet: a Python venv per Python client,
an npm project per Node client (Node 24 from PyPI, shared with the conformance suite through
`tests.client.conformance`). An environment is reused while its stamp file names exactly the packages it was
built with; a lock per environment keeps concurrent test runs from building the same one twice.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.client.conformance import HarnessUnavailable, exclusive_lock, install_node, npm_install, run_setup_step
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
            try:
                run_setup_step([sys.executable, "-m", "venv", str(venv)], f"creating the venv {name}")
                run_setup_step(
                    [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
                    f"pip install {' '.join(requirements)}",
                )
            except HarnessUnavailable as exc:
                raise ClientUnavailable(str(exc)) from None
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


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Test downloads (Node, npm packages, client venvs); never committed.\n*\n")
    with exclusive_lock(CACHE / f".{name}.lock"):
        yield
