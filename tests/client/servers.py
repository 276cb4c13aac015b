"""Test servers for the client: the feature server in a process of its own, on a free loopback port."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import serving_process

ROOT = Path(__file__).resolve().parents[2]
FEATURE_SERVER = [sys.executable, "-m", "tests.client.feature_server"]
_LISTENING = re.compile(r"listening at (http://\S+/mcp)")


@contextmanager
def feature_server() -> Iterator[str]:
    """Start tests/client/feature_server.py over HTTP; yield its URL; always stop it."""
    command = [*FEATURE_SERVER, "--port", "0"]
    with serving_process(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, ready=_LISTENING) as server:
        yield server.url
