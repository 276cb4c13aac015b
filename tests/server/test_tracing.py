"""The SDK's OpenTelemetry spans: made when OpenTelemetry is set up, skipped when they would go nowhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from safedb.server.tracing import SDK_TRACING_MIDDLEWARE
from tests.helpers import in_process_server, rows

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

# A tracer provider that records the names of the spans started, set up before SafeDB builds its server (as
# `opentelemetry-instrument` does) or after; then a read and an approved DELETE through a real client in
# the handshake era, whose question is a request the server sends.
_SPANS = """
import asyncio, json, sys
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

from mcp.client.client import Client
from tests.helpers import Responder, in_process_server

async def main(set_up_first):
    if set_up_first:
        trace.set_tracer_provider(RecordingProvider())
    async with in_process_server(Path(sys.argv[1])) as (server, _):
        if not set_up_first:
            trace.set_tracer_provider(RecordingProvider())
        async with Client(server, mode="legacy", elicitation_callback=Responder()) as client:
            for query in ("SELECT 1", "DELETE FROM invoices WHERE id = 7"):
                result = await client.call_tool("execute_query", {"query": query})
                assert not result.is_error, result
    print(json.dumps(sorted(set(names))))

asyncio.run(main(sys.argv[2] == "first"))
"""


def _span_names(database: Path, provider: str) -> list[str]:
    finished = subprocess.run(
        [sys.executable, "-c", _SPANS, str(database), provider],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    assert rows(database, "SELECT id FROM invoices WHERE id = 7") == [], "the approved DELETE ran"
    names: list[str] = json.loads(finished.stdout.splitlines()[-1])
    return names


async def test_without_opentelemetry_set_up_the_sdk_tracing_middleware_is_left_out(demo_db: Path) -> None:
    assert SDK_TRACING_MIDDLEWARE, "the SDK's tracing middleware is no longer where SafeDB looks for it"
    async with in_process_server(demo_db) as (server, _):
        layers = [type(layer).__name__ for layer in server.middleware]
    assert not any(isinstance(layer, SDK_TRACING_MIDDLEWARE) for layer in server.middleware), layers
    assert "RequestStateBoundary" in layers  # the rest of the SDK's chain stays


def test_with_a_tracer_provider_set_up_every_message_and_question_gets_its_span(demo_db: Path) -> None:
    names = _span_names(demo_db, "first")
    assert "tools/call execute_query" in names
    assert "MCP send elicitation/create" in names, "the question the server sent"


def test_without_a_tracer_provider_when_the_server_is_built_no_spans_are_made(demo_db: Path) -> None:
    """Spans that would have gone nowhere are not made at all: a provider set up later sees none, not even
    the one the SDK opens around every question, for as long as the person takes to answer."""
    assert _span_names(demo_db, "later") == []
