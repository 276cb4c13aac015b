"""The load generator: each scenario drives one server over `bench.wire` and returns flat metrics.

Everything runs in one asyncio loop in this process. Server CPU and memory come from /proc (see
`bench.procstat`); the load generator's own CPU time is reported beside the server's so a reader can
check that the server, not the client, was the bottleneck.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench import procstat
from bench.dataset import DESTRUCTIVE, SMALL_READ
from bench.wire import (
    HANDSHAKE_VERSION,
    MODERN_VERSION,
    Connection,
    HandshakeSession,
    ModernCaller,
    PendingCall,
    Response,
    WireError,
    tool_call_ok,
)

Metrics = dict[str, float]
ERAS = (HANDSHAKE_VERSION, MODERN_VERSION)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    pid: int

    async def connect(self) -> Connection:
        return await Connection.open(self.host, self.port)


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def latency_metrics(prefix: str, seconds: Sequence[float]) -> Metrics:
    return {
        f"{prefix}_p50_ms": percentile(seconds, 0.5) * 1000,
        f"{prefix}_p99_ms": percentile(seconds, 0.99) * 1000,
        f"{prefix}_count": float(len(seconds)),
    }


def executed(message: bytes) -> bool:
    """The final result of an approved destructive call says it ran (both servers put `executed: true`)."""
    return b'"executed":true' in message and tool_call_ok(message)


# One call of a closed loop: (start, result time, success).
Call = Callable[[], Awaitable[tuple[float, float, bool]]]


async def _closed_loop(target: Target, calls: Sequence[Call], seconds: float, warmup: float, unit: str) -> Metrics:
    """Run each of `calls` in a loop of its own; measure the window [warmup, warmup + seconds]."""
    records: list[tuple[float, float, bool]] = []
    stop = asyncio.Event()

    async def worker(call: Call) -> None:
        while not stop.is_set():
            records.append(await call())

    tasks = [asyncio.create_task(worker(call)) for call in calls]
    try:
        await asyncio.sleep(warmup)
        busy0, server0, client0 = (
            procstat.machine_busy_seconds(),
            procstat.sample(target.pid),
            procstat.own_cpu_seconds(),
        )
        t0 = time.perf_counter()
        await asyncio.sleep(seconds)
        busy1, server1, client1 = (
            procstat.machine_busy_seconds(),
            procstat.sample(target.pid),
            procstat.own_cpu_seconds(),
        )
        t1 = time.perf_counter()
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    finally:
        for task in tasks:
            task.cancel()
    done = [(start, end, ok) for start, end, ok in records if t0 <= end <= t1]
    count = len(done)
    server_cpu = server1.cpu_seconds - server0.cpu_seconds
    client_cpu = client1 - client0
    metrics = {
        f"{unit}_per_s": count / (t1 - t0),
        "errors": float(sum(1 for _, _, ok in done if not ok)),
        "server_cpu_per_call_ms": server_cpu / count * 1000 if count else math.nan,
        "client_cpu_per_call_ms": client_cpu / count * 1000 if count else math.nan,
        "server_cpu_cores": server_cpu / (t1 - t0),
        "client_cpu_cores": client_cpu / (t1 - t0),
        # CPU the rest of the machine used meanwhile: other processes competing for the same cores.
        "other_cpu_cores": max(0.0, (busy1 - busy0) - server_cpu - client_cpu) / (t1 - t0),
    }
    metrics.update(latency_metrics("latency", [end - start for start, end, _ in done if start >= t0]))
    return metrics


async def _handshake_sessions(target: Target, count: int) -> list[tuple[Connection, HandshakeSession]]:
    opened = []
    for _ in range(count):
        connection = await target.connect()
        opened.append((connection, await HandshakeSession.open(connection)))
    return opened


def _modern_read(connection: Connection, queries: str | Iterator[str]) -> Call:
    """One fixed query (its request body pre-built, only the id changes) or the next of `queries` each call."""
    caller = ModernCaller()
    if isinstance(queries, str):
        body = caller.prebuilt(queries)
    else:
        body = lambda request_id: caller.body(request_id, next(queries))  # noqa: E731
    counter = iter(range(1, 1 << 62))

    async def call() -> tuple[float, float, bool]:
        request = body(next(counter))
        start = time.perf_counter()
        response = await connection.request(request, caller.headers)
        return start, response.result_at, response.status == 200 and tool_call_ok(response.messages[-1])

    return call


def _handshake_read(connection: Connection, session: HandshakeSession, queries: str | Iterator[str]) -> Call:
    """One fixed query or the next of `queries` each call."""
    each = itertools.repeat(queries) if isinstance(queries, str) else queries

    async def call() -> tuple[float, float, bool]:
        query = next(each)
        start = time.perf_counter()
        response = await session.call(connection, query)
        return start, response.result_at, response.status == 200 and tool_call_ok(response.messages[-1])

    return call


def new_small_reads() -> Iterator[str]:
    """The small SELECT, each time as a statement text the server has not seen (same rows, same work)."""
    return (f"{SMALL_READ} AND {n} > 0" for n in itertools.count(1))


async def read_path(
    target: Target, era: str, sessions: int, seconds: float, warmup: float, *, new_statements: bool = False
) -> Metrics:
    """K concurrent sessions (connections, on 2026-07-28) calling a small SELECT in a closed loop; with
    `new_statements`, every call sends a statement text never sent before."""
    queries: str | Iterator[str] = new_small_reads() if new_statements else SMALL_READ
    connections: list[Connection] = []
    try:
        if era == MODERN_VERSION:
            connections = [await target.connect() for _ in range(sessions)]
            calls = [_modern_read(connection, queries) for connection in connections]
        else:
            opened = await _handshake_sessions(target, sessions)
            connections = [connection for connection, _ in opened]
            calls = [_handshake_read(connection, session, queries) for connection, session in opened]
        return await _closed_loop(target, calls, seconds, warmup, "calls")
    finally:
        for connection in connections:
            await connection.close()


def _modern_round_trip(connection: Connection, query: str) -> Call:
    caller = ModernCaller()
    counter = iter(range(1, 1 << 62))

    async def call() -> tuple[float, float, bool]:
        start = time.perf_counter()
        response, rounds = await caller.round_trip(connection, next(counter), query)
        return start, response.result_at, rounds == 2 and executed(response.messages[-1])

    return call


def _handshake_round_trip(connection: Connection, answers: Connection, session: HandshakeSession, query: str) -> Call:
    async def call() -> tuple[float, float, bool]:
        start = time.perf_counter()
        pending = await PendingCall.start(session, connection, query)
        await session.answer(answers, await pending.until_elicitation())
        final = await pending.until_result()
        return start, pending.response.result_at, executed(final)

    return call


async def elicitation_round_trips(target: Target, era: str, workers: int, seconds: float, warmup: float) -> Metrics:
    """K concurrent clients each running DELETE round trips: call, get asked, accept, get the result."""
    connections: list[Connection] = []
    try:
        calls: list[Call] = []
        if era == MODERN_VERSION:
            connections = [await target.connect() for _ in range(workers)]
            calls = [_modern_round_trip(connection, DESTRUCTIVE) for connection in connections]
        else:
            for connection, session in await _handshake_sessions(target, workers):
                answers = await target.connect()
                connections += [connection, answers]
                calls.append(_handshake_round_trip(connection, answers, session, DESTRUCTIVE))
        return await _closed_loop(target, calls, seconds, warmup, "round_trips")
    finally:
        for connection in connections:
            await connection.close()


async def _fresh_reads(target: Target, era: str, count: int) -> list[float]:
    """Latencies of `count` small reads, one after another, on a new connection (and session)."""
    connection = await target.connect()
    try:
        if era == MODERN_VERSION:
            call = _modern_read(connection, SMALL_READ)
        else:
            call = _handshake_read(connection, await HandshakeSession.open(connection), SMALL_READ)
        latencies = []
        for _ in range(count):
            start, end, ok = await call()
            if not ok:
                raise WireError("a read failed while approvals were waiting")
            latencies.append(end - start)
        return latencies
    finally:
        await connection.close()


async def _warm_up(target: Target, era: str, calls: int) -> None:
    """A few reads and round trips first, so one-time costs (lazy imports, caches) are not counted as growth."""
    await _fresh_reads(target, era, calls)
    connection = await target.connect()
    answers = await target.connect()
    try:
        if era == MODERN_VERSION:
            call = _modern_round_trip(connection, DESTRUCTIVE)
        else:
            call = _handshake_round_trip(connection, answers, await HandshakeSession.open(connection), DESTRUCTIVE)
        for _ in range(calls):
            await call()
    finally:
        await connection.close()
        await answers.close()


async def _settled_rss(pid: int) -> int:
    """RSS once the server has gone quiet (its CPU time stopped moving), in KiB."""
    last = procstat.sample(pid)
    for _ in range(50):
        await asyncio.sleep(0.1)
        now = procstat.sample(pid)
        if now.cpu_seconds == last.cpu_seconds:
            return now.rss_kib
        last = now
    return last.rss_kib


async def waiting_modern(target: Target, count: int, concurrency: int, reads: int, warmup_calls: int) -> Metrics:
    """2026-07-28: issue `count` DELETE calls and keep their InputRequiredResults (nothing waits on the
    server but what the sealed requestState carries); measure the server, read meanwhile, then answer all."""
    await _warm_up(target, MODERN_VERSION, warmup_calls)
    # Connections open before the baseline: they are not waiting calls.
    connections = [await target.connect() for _ in range(concurrency)]
    rss0 = await _settled_rss(target.pid)
    caller = ModernCaller()
    questions: list[dict[str, Any]] = [{} for _ in range(count)]
    finals: list[bool] = [False] * count
    next_index = iter(range(count))

    async def issue(connection: Connection) -> None:
        for index in next_index:
            response = await caller.call(connection, index + 1, DESTRUCTIVE)
            result = response.json()["result"]
            if result.get("resultType") != "input_required":
                raise WireError(f"expected input_required, got {str(result)[:200]}")
            questions[index] = result

    async def answer(connection: Connection) -> None:
        for index in next_index:
            response = await caller.answer(connection, index + 1, DESTRUCTIVE, questions[index])
            finals[index] = executed(response.messages[-1])

    try:
        started = time.perf_counter()
        await asyncio.gather(*(issue(connection) for connection in connections))
        issue_seconds = time.perf_counter() - started
        rss1 = await _settled_rss(target.pid)
        read_latencies = await _fresh_reads(target, MODERN_VERSION, reads)
        next_index = iter(range(count))
        started = time.perf_counter()
        await asyncio.gather(*(answer(connection) for connection in connections))
        answer_seconds = time.perf_counter() - started
    finally:
        for connection in connections:
            await connection.close()
    rss2 = await _settled_rss(target.pid)
    state_bytes = sum(len(json.dumps(question)) for question in questions) / count
    metrics = _waiting_metrics(count, (rss0, rss1, rss2), issue_seconds, answer_seconds, finals, read_latencies)
    metrics["input_required_result_bytes"] = state_bytes
    return metrics


def _waiting_metrics(
    count: int,
    rss_kib: tuple[float, float, float],
    issue_seconds: float,
    answer_seconds: float,
    finals: Sequence[bool],
    read_latencies: list[float],
) -> Metrics:
    """The waiting-approvals figures: RSS (KiB) before, while `count` calls wait, and after all answered."""
    before, waiting, after = rss_kib
    metrics = {
        "waiting": float(count),
        "rss_before_mib": before / 1024,
        "rss_growth_waiting_mib": (waiting - before) / 1024,
        "rss_per_waiting_call_kib": (waiting - before) / count,
        "rss_growth_after_answers_mib": (after - before) / 1024,
        "issue_per_s": count / issue_seconds,
        "answer_per_s": count / answer_seconds,
        "completed": float(sum(finals)),
    }
    metrics.update(latency_metrics("fresh_read", read_latencies))
    return metrics


async def waiting_handshake(target: Target, count: int, concurrency: int, reads: int, warmup_calls: int) -> Metrics:
    """2025-11-25: `count` sessions, each with a DELETE call waiting in elicitation (its SSE stream open);
    measure the server, read on a fresh session meanwhile, then answer all and read every result."""
    await _warm_up(target, HANDSHAKE_VERSION, warmup_calls)
    # The connections that will answer open before the baseline: they are not waiting calls.
    answer_pool: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(concurrency):
        answer_pool.put_nowait(await target.connect())
    rss0 = await _settled_rss(target.pid)
    gate = asyncio.Semaphore(concurrency)
    waiting: list[tuple[PendingCall, dict[str, Any]]] = []

    async def ask() -> None:
        async with gate:
            connection = await target.connect()
            session = await HandshakeSession.open(connection)
            pending = await PendingCall.start(session, connection, DESTRUCTIVE)
            waiting.append((pending, await pending.until_elicitation()))

    async def finish(pending: PendingCall, elicitation: dict[str, Any]) -> bool:
        async with gate:
            connection = await answer_pool.get()
            try:
                await pending.session.answer(connection, elicitation)
            finally:
                answer_pool.put_nowait(connection)
            return executed(await pending.until_result())

    try:
        started = time.perf_counter()
        await asyncio.gather(*(ask() for _ in range(count)))
        setup_seconds = time.perf_counter() - started
        rss1 = await _settled_rss(target.pid)
        read_latencies = await _fresh_reads(target, HANDSHAKE_VERSION, reads)
        started = time.perf_counter()
        finals = await asyncio.gather(*(finish(pending, elicitation) for pending, elicitation in waiting))
        answer_seconds = time.perf_counter() - started
    finally:
        for pending, _ in waiting:
            await pending.connection.close()
        while not answer_pool.empty():
            await answer_pool.get_nowait().close()
    rss2 = await _settled_rss(target.pid)
    return _waiting_metrics(count, (rss0, rss1, rss2), setup_seconds, answer_seconds, finals, read_latencies)


async def large_result(
    target: Target, era: str, query: str, min_seconds: float, min_calls: int, max_calls: int
) -> Metrics:
    """Repeat one large SELECT while small reads run one after another on another session; time, bytes and
    rows of the large call, the server's peak memory, and the latency of the small reads issued meanwhile."""
    big_connection = await target.connect()
    small_connection = await target.connect()
    try:
        big, small = await _large_and_small(era, query, big_connection, small_connection)
        # Warm up both paths (and read the result's shape once), then measure from a reset peak.
        await small()
        structured = (await big()).json()["result"].get("structuredContent") or {}
        rss_before = await _settled_rss(target.pid)
        peak_reset = procstat.reset_peak(target.pid)
        big_calls: list[float] = []
        sizes: list[float] = []
        small_latencies: list[float] = []
        in_flight = asyncio.Event()
        done = asyncio.Event()

        async def big_loop() -> None:
            started = time.perf_counter()
            try:
                while len(big_calls) < max_calls and (
                    len(big_calls) < min_calls or time.perf_counter() - started < min_seconds
                ):
                    in_flight.set()
                    start = time.perf_counter()
                    response = await big()
                    if response.status != 200 or not tool_call_ok(response.messages[-1]):
                        raise WireError("the large SELECT failed")
                    big_calls.append(response.result_at - start)
                    sizes.append(float(response.size))
            finally:
                done.set()

        async def small_loop() -> None:
            # Every small read issued while large calls run counts, also one that ends after the last of them:
            # on a busy machine one small read may outlast a short run of large calls.
            await in_flight.wait()
            while not done.is_set():
                start, end, ok = await small()
                if not ok:
                    raise WireError("a small read failed during the large SELECT")
                small_latencies.append(end - start)

        async with procstat.PeakWatcher(target.pid) as watcher:
            await asyncio.gather(big_loop(), small_loop())
        peak = max(watcher.peak_kib, procstat.sample(target.pid).hwm_kib if peak_reset else 0)
    finally:
        await big_connection.close()
        await small_connection.close()
    metrics = {
        "rows_returned": float(structured.get("row_count", len(structured.get("rows", [])))),
        "truncated": 1.0 if structured.get("truncated") else 0.0,
        "response_bytes": percentile(sizes, 0.5),
        "rss_before_mib": rss_before / 1024,
        "peak_rss_mib": peak / 1024,
        "peak_growth_mib": (peak - rss_before) / 1024,
    }
    metrics.update(latency_metrics("large_call", big_calls))
    metrics.update(latency_metrics("small_read", small_latencies))
    return metrics


async def _large_and_small(
    era: str, query: str, big_connection: Connection, small_connection: Connection
) -> tuple[Callable[[], Awaitable[Response]], Call]:
    """The large call (its whole response, to count bytes) and the small read, in the era's form."""
    if era == MODERN_VERSION:
        caller = ModernCaller()

        async def modern_big() -> Response:
            return await caller.call(big_connection, 1, query)

        return modern_big, _modern_read(small_connection, SMALL_READ)
    session = await HandshakeSession.open(big_connection)

    async def handshake_big() -> Response:
        return await session.call(big_connection, query)

    return handshake_big, _handshake_read(small_connection, await HandshakeSession.open(small_connection), SMALL_READ)
