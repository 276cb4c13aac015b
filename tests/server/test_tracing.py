"""The SDK's OpenTelemetry spans: made when OpenTelemetry is set up, skipped when they would go nowhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from safedb.server.app import _SDK_TRACING
from tests.helpers import in_process_server

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

# A tracer provider that records the names of the spans started, set up before SafeDB starts (as
# `opentelemetry-instrument` does); then one read through a real client.
_SPANS_WITH_A_PROVIDER = """
import asyncio, sys
from pathlib import Path
from opentelemetry import trace

names = []

class RecordingTracer(trace.NoOpTracer):
    def start_span(self, name, *args, **kwargs):
        names.append(name)
        return super().start_span(name, *args, **kwargs)

class RecordingProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return RecordingTracer()

trace.set_tracer_provider(RecordingProvider())

from mcp.client.client import Client
from tests.helpers import in_process_server

async def main():
    async with in_process_server(Path(sys.argv[1])) as (server, _), Client(server) as client:
        result = await client.call_tool("execute_query", {"query": "SELECT 1"})
        assert not result.is_error, result
    print(sorted(set(names)))

asyncio.run(main())
"""


async def test_without_opentelemetry_set_up_no_spans_are_made(demo_db: Path) -> None:
    assert _SDK_TRACING, "the SDK's tracing middleware is no longer where SafeDB looks for it"
    async with in_process_server(demo_db) as (server, _):
        layers = [type(layer).__name__ for layer in server.middleware]
    assert not any(isinstance(layer, _SDK_TRACING) for layer in server.middleware), layers
    assert "RequestStateBoundary" in layers  # the rest of the SDK's chain stays


def test_with_a_tracer_provider_set_up_every_message_gets_its_span(demo_db: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", _SPANS_WITH_A_PROVIDER, str(demo_db)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    assert "tools/call execute_query" in finished.stdout
