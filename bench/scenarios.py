"""The scenarios of one benchmark run, their sizes (full or quick) and the targets they are judged by."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bench import load
from bench.dataset import large_query
from bench.load import Metrics, Target
from bench.wire import HANDSHAKE_VERSION, MODERN_VERSION


@dataclass(frozen=True)
class Plan:
    """How big each scenario is. Every scenario is bounded in time and in count."""

    read_sessions: int = 8
    read_seconds: float = 6.0
    elicit_workers: int = 4
    elicit_seconds: float = 6.0
    warmup_seconds: float = 2.0
    waiting_modern: tuple[int, ...] = (1_000, 10_000)
    waiting_handshake: tuple[int, ...] = (1_000,)
    waiting_concurrency: int = 32
    fresh_reads: int = 50
    warmup_calls: int = 20
    large_rows: tuple[int, ...] = (100_000, 1_000_000)
    large_shapes: tuple[str, ...] = ("scan", "sorted")
    large_min_seconds: float = 3.0
    large_min_calls: int = 3
    large_max_calls: int = 50
    rounds: int = 2
    """Measurements per server of the memory and large-result scenarios, whose figures vary little."""
    closed_loop_rounds: int = 9
    """Measurements per server of the read and elicitation scenarios: rates on a shared machine drift by
    tens of percent from one minute to the next, so these take more rounds, each short, so that the two
    servers' rounds of a pair run close together."""
    fresh_servers: bool = True
    """Memory scenarios start new server processes for every measurement; False keeps one set for the run."""


FULL = Plan()
QUICK = Plan(
    read_sessions=2,
    read_seconds=0.3,
    elicit_workers=2,
    elicit_seconds=0.3,
    warmup_seconds=0.1,
    waiting_modern=(20,),
    waiting_handshake=(10,),
    waiting_concurrency=4,
    fresh_reads=5,
    warmup_calls=2,
    large_rows=(2_000,),
    large_shapes=("scan", "sorted"),
    large_min_seconds=0.1,
    large_min_calls=1,
    large_max_calls=3,
    rounds=1,
    closed_loop_rounds=1,
    fresh_servers=False,
)

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Headline:
    metric: str
    label: str
    better: Better


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    title: str
    params: dict[str, Any]
    run: Callable[[Target], Awaitable[Metrics]]
    headlines: tuple[Headline, ...]
    rounds: int
    fresh_server: bool = False
    """Start new server processes for every measurement (memory scenarios), instead of one per scenario."""
    ratios: tuple[str, ...] = field(default=())
    """Metrics whose SafeDB/reference ratio is reported (default: the headline metrics)."""


_READ_HEADLINES = (
    Headline("calls_per_s", "calls/s", "higher"),
    Headline("latency_p50_ms", "p50 ms", "lower"),
    Headline("latency_p99_ms", "p99 ms", "lower"),
    Headline("server_cpu_per_call_ms", "server CPU ms/call", "lower"),
    Headline("client_cpu_per_call_ms", "client CPU ms/call", "lower"),
)
_ELICIT_HEADLINES = (
    Headline("round_trips_per_s", "round trips/s", "higher"),
    Headline("latency_p50_ms", "p50 ms", "lower"),
    Headline("latency_p99_ms", "p99 ms", "lower"),
    Headline("server_cpu_per_call_ms", "server CPU ms/round trip", "lower"),
)
_WAITING_HEADLINES = (
    Headline("rss_growth_waiting_mib", "RSS growth MiB", "lower"),
    Headline("rss_per_waiting_call_kib", "KiB/waiting call", "lower"),
    Headline("fresh_read_p50_ms", "fresh read p50 ms", "lower"),
    Headline("fresh_read_p99_ms", "fresh read p99 ms", "lower"),
    Headline("issue_per_s", "asked/s", "higher"),
    Headline("answer_per_s", "answered/s", "higher"),
    Headline("completed", "completed", "higher"),
)
_LARGE_HEADLINES = (
    Headline("large_call_p50_ms", "large call p50 ms", "lower"),
    Headline("response_bytes", "bytes sent", "lower"),
    Headline("rows_returned", "rows returned", "higher"),
    Headline("peak_rss_mib", "peak RSS MiB", "lower"),
    Headline("peak_growth_mib", "peak growth MiB", "lower"),
    Headline("small_read_p50_ms", "small read p50 ms", "lower"),
    Headline("small_read_p99_ms", "small read p99 ms", "lower"),
)

_ERA_SHORT = {HANDSHAKE_VERSION: "2025", MODERN_VERSION: "2026"}


def build(plan: Plan) -> list[Scenario]:
    scenarios: list[Scenario] = []
    for new_statements in (False, True):
        for era in (HANDSHAKE_VERSION, MODERN_VERSION):

            async def read(target: Target, era: str = era, new_statements: bool = new_statements) -> Metrics:
                return await load.read_path(
                    target, era, plan.read_sessions, plan.read_seconds, plan.warmup_seconds,
                    new_statements=new_statements,
                )  # fmt: skip

            what = "small SELECT, a new statement text every call" if new_statements else "small SELECT"
            scenarios.append(
                Scenario(
                    f"read-{'new-' if new_statements else ''}{_ERA_SHORT[era]}",
                    "read",
                    f"Read path, {era}: {plan.read_sessions} concurrent sessions, {what}, {plan.read_seconds:g} s",
                    {"era": era, "sessions": plan.read_sessions, "seconds": plan.read_seconds,
                     "new_statements": new_statements},
                    read,
                    _READ_HEADLINES,
                    plan.closed_loop_rounds,
                )
            )  # fmt: skip
    for era in (HANDSHAKE_VERSION, MODERN_VERSION):

        async def elicit(target: Target, era: str = era) -> Metrics:
            return await load.elicitation_round_trips(
                target, era, plan.elicit_workers, plan.elicit_seconds, plan.warmup_seconds
            )

        scenarios.append(
            Scenario(
                f"elicit-{_ERA_SHORT[era]}",
                "elicit",
                f"Elicitation round trip, {era}: {plan.elicit_workers} concurrent auto-accepting clients, DELETE, "
                f"{plan.elicit_seconds:g} s",
                {"era": era, "workers": plan.elicit_workers, "seconds": plan.elicit_seconds},
                elicit,
                _ELICIT_HEADLINES,
                plan.closed_loop_rounds,
            )
        )
    for count in plan.waiting_modern:

        async def wait_modern(target: Target, count: int = count) -> Metrics:
            return await load.waiting_modern(
                target, count, plan.waiting_concurrency, plan.fresh_reads, plan.warmup_calls
            )

        scenarios.append(
            Scenario(
                f"waiting-2026-{count}",
                "waiting",
                f"Waiting approvals, {MODERN_VERSION}: {count:,} InputRequiredResults issued, then answered",
                {"era": MODERN_VERSION, "waiting": count, "concurrency": plan.waiting_concurrency},
                wait_modern,
                _WAITING_HEADLINES,
                plan.rounds,
                fresh_server=True,
            )
        )
    for count in plan.waiting_handshake:

        async def wait_handshake(target: Target, count: int = count) -> Metrics:
            return await load.waiting_handshake(
                target, count, plan.waiting_concurrency, plan.fresh_reads, plan.warmup_calls
            )

        scenarios.append(
            Scenario(
                f"waiting-2025-{count}",
                "waiting",
                f"Waiting approvals, {HANDSHAKE_VERSION}: {count:,} sessions waiting in elicitation, then answered",
                {"era": HANDSHAKE_VERSION, "waiting": count, "concurrency": plan.waiting_concurrency},
                wait_handshake,
                _WAITING_HEADLINES,
                plan.rounds,
                fresh_server=True,
            )
        )
    for rows in plan.large_rows:
        for shape in plan.large_shapes:
            query = large_query(rows, shape)

            async def large(target: Target, query: str = query) -> Metrics:
                return await load.large_result(
                    target,
                    HANDSHAKE_VERSION,
                    query,
                    plan.large_min_seconds,
                    plan.large_min_calls,
                    plan.large_max_calls,
                )

            scenarios.append(
                Scenario(
                    f"large-{shape}-{rows}",
                    "large",
                    f"Large result, {HANDSHAKE_VERSION}: `{query}` over {rows:,} rows, small reads meanwhile",
                    {"era": HANDSHAKE_VERSION, "rows": rows, "shape": shape, "query": query},
                    large,
                    _LARGE_HEADLINES,
                    plan.rounds,
                    fresh_server=True,
                )
            )
    return scenarios
