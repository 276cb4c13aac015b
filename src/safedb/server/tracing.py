"""The SDK's OpenTelemetry spans: kept when OpenTelemetry is set up, left out when they would go nowhere.

The SDK opens a span for every message the server receives (its middleware) and one around every request
the server sends, such as an elicitation, held open until the client answers: for as long as a person takes.
Without a tracer provider those spans record nothing, yet each costs CPU, and memory (about 6 KiB between
them) for every call waiting for a person. Both hooks are private to the SDK: a later release may move them,
and then there is nothing to leave out (tests/server/test_tracing.py says so).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared import jsonrpc_dispatcher
from opentelemetry import trace
from opentelemetry.trace import Span

try:
    from mcp.server._otel import OpenTelemetryMiddleware

    SDK_TRACING_MIDDLEWARE: tuple[type, ...] = (OpenTelemetryMiddleware,)
except ImportError:
    SDK_TRACING_MIDDLEWARE = ()

# One shared context for every request sent: entering it makes nothing, and its span records nothing.
_NO_SPAN: nullcontext[Span] = nullcontext(trace.INVALID_SPAN)


def _no_outbound_span(*_args: Any, **_kwargs: Any) -> nullcontext[Span]:
    """What the SDK's dispatcher calls instead of `otel_span` when nothing would record the span."""
    return _NO_SPAN


def trace_only_when_set_up(server: MCPServer) -> None:
    """Leave the SDK's spans out unless OpenTelemetry is set up (a tracer provider, for instance from
    `opentelemetry-instrument safedb serve`) by the time the server is built. The SDK documents dropping its
    middleware as the way to opt out of the incoming spans; the outgoing ones have no such switch, so the
    dispatcher's span helper is replaced (for the whole process: nothing in it would record them either)."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    server.middleware[:] = [layer for layer in server.middleware if not isinstance(layer, SDK_TRACING_MIDDLEWARE)]
    if hasattr(jsonrpc_dispatcher, "otel_span"):
        jsonrpc_dispatcher.otel_span = _no_outbound_span
