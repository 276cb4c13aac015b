"""Summaries of a run (medians over rounds, ratios, targets) and the Markdown page docs/benchmarks.md."""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.load import Metrics

NOTES = [
    "Read path and elicitation: closed loops (each session sends its next call when the previous answer "
    "arrives); calls/s counts results that arrived inside the measured window, after a warm-up.",
    "Read path: `read-*` repeats one statement, which SafeDB classifies once and then remembers until the "
    "schema changes; `read-new-*` sends a statement text never seen before on every call (the same query with "
    "a different always-true condition), so SafeDB classifies every call: SQLite compiles and classifies each "
    "text. Since 681baa4 the parser's second opinion is remembered by the text with its integer literals as 0, so "
    "read-new's texts, which differ only in a number, are parsed once; a text that differs in more (another "
    "column, another string) is parsed anew, at the cost the next note describes.",
    "Read path, new statements (profiled on 2026-11-26 with py-spy): parsing each new statement with sqlglot, "
    "the parser's second opinion beside SQLite's own view, takes about a fifth of SafeDB's server time on "
    "`read-new-*`. sqlglot's compiled build (`sqlglot[c]`) parses about four times faster and took read-new-2026 "
    "from 0.94x to 1.05x (one full run of each), but it imports 78 modules where the pure build imports 42 (51 MB "
    "of RSS at start instead of 26), which put the 1,000,000-row reads' peaks at 106 and 117 MiB, past their "
    "target: not kept. Tried again on 2026-11-27 (full run of 9b1c29c): read-new-2026 1.11x, peaks 106 and 115 "
    "MiB. SafeDB holds up with it installed (tests/db/test_compiled_parser.py): compiled, sqlglot crashed the "
    "process on 20,000 parentheses nested in a FROM clause, and no longer gets statements nested past 100.",
    "Latency runs to the arrival of the JSON-RPC result (on an SSE stream the final chunk may follow a little "
    "later). Elicitation latency covers the whole round trip: call, question, answer, result.",
    "Waiting approvals on 2026-07-28: a waiting approval is an issued question; the question itself travels in "
    "the sealed requestState the server hands out, and since 4520144 the server keeps, per question, only its "
    "request id and when it expires, to record it as timed out if no answer ever comes back "
    "(src/safedb/server/unanswered.py): 10,000 waiting questions took 4.0 to 4.4 MiB with it (2026-11-28, "
    "`--only waiting-2026-10000`), where the run of 681baa4, which predates it, showed 1.7. Memory is measured "
    "after all questions are out and before any is answered; then every one is answered and must complete.",
    "Waiting approvals in the handshake era: every waiting call has its own session and an open SSE stream; "
    "memory per waiting call includes its session. Both measured after a warm-up of 20 reads and 20 round "
    "trips, on fresh server processes.",
    "Large results: both servers cap a result at 500 rows and about 512 KiB of values (SafeDB's defaults). "
    "`scan` stops reading at the cap; `sorted` makes the engine read and sort every row first. The reference "
    "returns a dict, which the SDK sends as pretty-printed JSON text and as structured content; SafeDB sends a "
    "50-row text table and the structured rows.",
    "Large results, `sorted`: SafeDB's readers keep the rows a sort holds in SQLite's memory, within its 512 MiB "
    "heap limit (`temp_store = MEMORY`, since 47a9bfb), where they were in temporary files, which nothing bounded "
    "(a read sorting an endless query wrote 2.1 GB of them in 8 s). Since bf6262b a query without a LIMIT of its "
    "own runs with a LIMIT of 501 (one past the row cap), so SQLite keeps only the first 501 rows of the sort while "
    "it reads, where it sorted all 1,000,000 (about 115 MiB, and a peak of 197 MiB in the run of 74836e8, since "
    "the allocator kept those pages after the warm-up's sort). The reference reads the whole sort, which SQLite "
    "writes to temporary files.",
    "Large results: the large call's time depends on how busy the server is with the small reads issued "
    "meanwhile (a server that answers them faster also has less time left for the large call), so compare it "
    "together with the small-read latency.",
    "The reference has no statement time limit, no read-only connection, no classification, no impact "
    "preview and no audit log. SafeDB writes three audit records per approved change: the approval is synced "
    "to the disk before the change runs, the request and the outcome within 0.1 s (docs/audit.md).",
    "The reference keeps the SDK's OpenTelemetry spans (one per incoming message and one around every request "
    "the server sends, such as a question, on by default); SafeDB leaves them out unless OpenTelemetry is set "
    "up (docs/configuration.md, Tracing), which saves about 6 KiB per waiting handshake-era call and some CPU "
    "per message.",
    "Where the time goes: the reference's tool is a plain function, which the SDK runs in a worker thread on "
    "every call. SafeDB runs short work on its event loop instead (docs/safety.md, section 6): reads, the "
    "classification of statements up to 1,000 characters, impact dry runs, and approved changes and audit "
    "appends while they stay quick. That is why it can serve reads faster. On top of the reference's work, an "
    "approved change costs SafeDB its classification, a dry run for the impact preview, three hash-chained "
    "audit appends and the checks that bind the approval to the statement, and the call waits for the "
    "approval record to reach the disk (one fdatasync: on the event loop's thread while the disk's syncs stay "
    "quick, since 3b75ca0, else by the audit store's own thread while the event loop serves other calls) before "
    "the change runs. The benchmark's DELETE matches no row, so neither "
    "server's commit of it writes to the disk. Both servers are bound by one core (the GIL) in the elicitation "
    "runs, so their rates follow their CPU per round trip. Profiled on 2026-11-25 (perf, py-spy --gil), SafeDB "
    "holds the GIL for less time per round trip than the reference (its results skip the reference's pydantic "
    "validation of a returned dict), but spends more in the kernel and in SQLite: the fdatasync, the -wal "
    "writes and file locks of three audit commits, and the dry run. Which side that balance favours moves with "
    "the machine's state: the run of an earlier version of this page, when the machine was slower (333 round "
    "trips/s), measured 2.83 ms of server CPU per round trip for SafeDB against 2.85 for the reference (0.94x); "
    "the run of checkout 2cae3f3, at about 500 round trips/s, 2.06 against 1.88; that of 2044854, with the "
    "first 2026-11-26 safety fixes (among them a second look, within the write transaction, at whether a "
    "counted change may REPLACE rows), 2.22 against 2.10 on 2025-11-25 and 2.43 against 2.13 on 2026-07-28; "
    "that of 51ab354, on a faster machine (the reference at about 630 round trips/s; no change to SafeDB's "
    "elicitation path since 2044854), 1.90 against 1.64 and 2.28 against 2.09 (0.87x and 0.96x): the reference "
    "gained more from the faster machine than SafeDB, whose extra work is in the kernel and SQLite, and "
    "read-new-2026 moved the same way (from 1.01x to 0.95x, with no change to that path either); that of "
    "3bb97d4, with the fixes of 2026-11-26 (among them an approved run and its records shielded from the call's "
    "cancellation, and the functions stored in the schema read from every classified statement's program), "
    "2.04 against 1.88 and 2.28 against 2.02 (0.91x and 0.91x, the reference at about 550 round trips/s); that "
    "of f2fa173, with the fixes of 2026-11-26's second session (among them an answer that counts only when the "
    "audit log holds its question, checked in the query that already looked for a replay), 2.10 against 1.81 and "
    "2.31 against 2.05 (0.87x and 0.92x, the reference at about 560 round trips/s); that with the fixes of "
    "2026-11-26's third session (among them a check, on every audit append, that the log's files are still the "
    "ones the server opened), 2.10 against 1.75 and 2.35 against 1.99 (0.84x and 0.88x, the reference at about "
    "590 round trips/s); that of 5b65813, on a machine about twice as slow, 4.08 against 3.83 and 4.54 against "
    "4.05 (0.95x and 0.92x). The runs of 3b75ca0 and of 681baa4 were made on a new machine (this page's on "
    "another, an AMD EPYC), where "
    "SafeDB's audit work weighs more: "
    "before this run, 5a08266 ran elicit-2026 at 0.78x the reference (6 alternating rounds of 4 s), with "
    "4.0 ms of server CPU per round trip against 3.0. The run of 3b75ca0 put read-new-2026 at 0.87x (single rounds "
    "0.85x to 0.94x), where 5b65813's page had 1.07x: alternating rounds of 5a08266 and 3b75ca0 on it gave 1.01x "
    "(no change to that path), and 0.95x against the reference in that comparison.",
    "Where the elicitation gap is, measured on 2026-11-26 (elicit-2025, CPU of each server thread from /proc, "
    "strace of single round trips): SafeDB's event-loop thread runs at 0.98 cores and the reference's at 0.94, so "
    "each rate follows that thread's CPU per round trip: 1.86 ms against 1.62, of which 0.27 against 0.17 in "
    "the kernel. In one round trip SafeDB's three audit commits write 5 to 8 pages each to the -wal file (42 "
    "pwrite calls in all; the index by request id puts each record on a random page), and its audit and "
    "database transactions take 38 file locks (fcntl) where the reference takes 9; the audit store's sync thread "
    "uses 0.04 cores. Sampled with py-spy, the audit appends take about 14% of SafeDB's event-loop time, the "
    "impact dry run 4% and the approved run 4%; the reference spends 10% of its event loop rendering the "
    "question's schema again on every call (the SDK's resolver).",
    "What the elicitation gap is made of (3-round elicitation runs on 2026-11-25, before the SDK's spans around "
    "questions were left out, when SafeDB stood at about 0.90x and 0.95x): with the audit appends made no-ops "
    "in a throwaway build, SafeDB ran 1.25x and 1.28x the reference, at 1.46 ms of server CPU per round trip "
    "instead of 1.93. Timed inside the server under this load (thread CPU time), a record synced later costs "
    "about 106 microseconds of CPU (38 to build and hash it, 17 to insert it, 47 for the transaction around it) "
    "and the answer 191, plus about 100 waiting for its fdatasync; each append writes about 5.4 pages to the "
    "write-ahead log (the table, three indexes and the head anchor). The same work runs about 2.5 times faster "
    "in a tight loop than in the server, so micro-benchmarks overstate every saving. Compared build against "
    "build in one run (6 to 8 alternating rounds of elicit-2025): leaving out the fdatasync altogether gained "
    "10% and 14% (an upper bound for any way of syncing); the answer's fdatasync done by a thread of the audit "
    "store's own while the event loop goes on, as shipped since 2026-11-25, gained 3%, 4% and 7% in three "
    "comparisons (on elicit-2026 it stayed within the noise, 1.00); the same through a pool's worker thread, "
    "one hand-off per sync, had lost 5% (0.27 ms more CPU per round trip), and through Linux AIO (caio) 8%; "
    "checkpoints moved to that thread as well stayed within the noise. Leaving out the request record gained "
    "8%, but the record is part of the log; writing it in the "
    "answer's transaction instead, building records more cheaply, or two fewer indexes (3.3 pages per append) "
    "stayed within 1%; a garbage collector threshold ten times higher lost 4%. Earlier trials, also not kept: "
    "all appends in one thread of their own (0.79x and 0.84x: the GIL hand-offs cost more than the commits); "
    "each append as one statement, the head anchor moved by a trigger (within the noise). Appending from a "
    "process of its own would take the work off the event loop, but a second Python process costs at least "
    "11 MiB, which the 1,000,000-row target (under 100 MB) has no room for.",
    "Measured again on 2026-11-27, on the new machine (alternating rounds of 4 s, elicit-2026 unless said, "
    "throwaway builds): with the audit appends made no-ops SafeDB ran 1.49x its shipped self (server CPU per round "
    "trip 0.65x), 1.12x the reference; without the fdatasync, 1.08x. Syncing the answer on the event loop's "
    "thread while the disk's syncs stay quick, as shipped in 3b75ca0, gave 1.09x (server CPU per round trip "
    "0.87x), and on elicit-2025 1.01x (CPU 0.96x); variants of it (a 2 ms budget, or retries every 10 s) gave "
    "1.02x to 1.07x, and 1.01x to 1.03x on elicit-2025. Under that load the syncs took 0.30 ms (median; 0.56 ms "
    "at the 99th percentile) and one in ten went to the store's thread. On read-new-2026 the parser's second "
    "opinion (sqlglot) is the largest single cost: a throwaway build that parsed only one statement per "
    "40-character beginning (so read-new's texts once) ran 1.27x its shipped self (server CPU 0.79x), 1.20x the "
    "reference; 681baa4, which parses a form once (integers as 0), ran 1.31x 21346ad in alternating rounds "
    "(server CPU 0.76x), 1.12x the reference.",
    "Handshake era, memory per waiting call: since 3733cec the ASGI middleware that drops `Last-Event-ID` hands "
    "the request to the SDK's app without a coroutine of its own around it, which a waiting call held for as "
    "long as it waited: 126.57 KiB against 126.88 (medians of four alternating runs on fresh servers).",
    "Measured on 2026-11-28 (elicit-2026, d5afd08, alternating rounds of 4 s): SafeDB 0.83x the reference, its "
    "event-loop thread at 0.95 cores and 3.29 ms of CPU per round trip against the reference's 0.94 cores and "
    "2.78 ms. Per round trip SafeDB's server makes 35 pwrite calls (the three audit commits' -wal pages), 42 fcntl "
    "locks, 18 stat calls, 6 preads and one fdatasync; sampled with py-spy, the audit appends take 1.0 ms of the "
    "event loop, the impact preview 0.26 and the approved run 0.29, where the reference's tool takes 1.0 ms in "
    "all, 0.66 of it rendering the question's schema. Two more throwaway builds, not kept: the audit writer "
    "without automatic checkpoints ran 0.96x its shipped self (a growing -wal file costs more to append to), and "
    "every append in the store's worker thread 0.67x (the hand-offs cost more than the appends).",
    "Tried on 2026-11-29 (4bf1721, four alternating rounds of 6 s per server): SafeDB's event loop on uvloop, the "
    "reference's on asyncio's own as the SDK runs it, gave elicit-2025 0.80x and elicit-2026 0.86x the reference, "
    "where the same comparison without it gave 0.79x and 0.85x: within the noise (the time goes to SafeDB's own "
    "work, not the loop), for 2.1 MiB more of resident memory. Not kept.",
    "Profiled again on 2026-11-29 (0188e39, elicit-2025, py-spy at 200 Hz, each thread's CPU from /proc): SafeDB's "
    "event-loop thread took 3.78 ms of CPU per round trip, the reference's process 3.12 ms in all, and the audit "
    "store's sync thread 0.07 ms. Of SafeDB's event-loop time the audit appends took about 19% (0.73 ms), the "
    "impact preview and the approved run about 15% (0.55 ms); its MCP and HTTP work (about 2.2 ms) is less than the "
    "reference's. This page's run has the safety fixes of that day, among them approvals bound to the identity of "
    "the tables they name (a root page looked up again within the approved run's write lock). The handshake era's "
    "memory per waiting call then sat at the target's edge: 130.0 KB on 0188e39 (two rounds) and 130.1 KB on "
    "b3c0446 (four rounds, 123.97 to 124.06 MiB for 1,000 calls).",
    "Handshake era, memory per waiting call, measured on 2026-11-29 with tracemalloc in the server (500 waiting "
    "calls): about 123 KB of Python objects each, nearly all the SDK's session, HTTP and SSE machinery, some 3.5 KB "
    "SafeDB's own. The form question's schema was validated again for every question, which copied it into each "
    "waiting one: since 1d7625d it is validated once per form and shared (and the dataclasses a waiting call holds "
    "are slotted), 126.6 KiB (129.7 KB) per waiting call where it took 127.0 KiB (four alternating rounds each, "
    "same machine). The run of 71bf935, this page's until 2026-11-30, was of the checkout after that day's second "
    "round of safety fixes (code bound by fingerprints in SQLite as in PostgreSQL, work that SQLite cannot "
    "interrupt kept off the event loop), which leave the benchmarks' statements as they were: no trigger, view or "
    "whole-table step, and at most one join.",
    "Profiled again on 2026-11-30 (eb14b3b, elicit-2025, py-spy at 200 Hz, 8 s per server): of SafeDB's "
    "event-loop samples the audit appends took 21% (their commits a fifth of that, their inserts a sixth, the "
    "answer's fdatasync on the event loop's thread a seventh), the impact preview and the approved run 14% (3% "
    "reading every schema for the shadow tables of virtual tables, at each dry run); the reference spent 15% of "
    "its event loop rendering the question's schema. Under the profiler SafeDB ran 274 round trips/s against the "
    "reference's 305 (0.90x), at 3.04 ms of server CPU per round trip against 2.78. In a tight loop an append "
    "takes about 114 microseconds without its sync, and an fdatasync of this machine's disk 0.27 ms. This page's "
    "run is of 1d8731d: since 71bf935 its changes on the benchmarks' paths are the SQLite classifier's count of "
    "nesting (statements nested past two levels compile in a worker thread; the benchmarks' are not), what an "
    "approval holds a statement to carried as one value, and fewer objects per waiting question. A full run of "
    "d2a40a1, before the last, put the handshake era at 127.2 KiB (130.2 KB) per waiting call, past its target, "
    "where 71bf935 had 126.9 KiB: waiting-2025 alone, three alternating rounds each, gave 124.21 MiB for 1,000 "
    "calls on d2a40a1, 123.95 on 71bf935 and 123.72 with a shared `nullcontext` for questions that report no "
    "progress and partials in place of two lambdas and their closures (1d8731d). In this page's run of 1d8731d it "
    "measured 123.98 MiB (two rounds): 126.96 KiB, 130.01 KB per waiting call, 0.01 KB past the target, within the "
    "noise between runs (about 0.2 MiB for 1,000 calls). Of it SafeDB's own objects are about 4 KB (tracemalloc, "
    "500 waiting calls: the question's text, the coroutine frames of the call, its audit context); the rest is the "
    "SDK's session, HTTP and SSE machinery, where each asyncio Event, some 20 per waiting call, takes 760 bytes.",
]

SAFEDB = "safedb"
REFERENCE = "reference"


def median_metrics(rounds: Sequence[Metrics]) -> Metrics:
    """Per metric, the median over the rounds (NaN values left out)."""
    names = {name for metrics in rounds for name in metrics}
    medians: Metrics = {}
    for name in sorted(names):
        values = [metrics[name] for metrics in rounds if name in metrics and not math.isnan(metrics[name])]
        medians[name] = statistics.median(values) if values else math.nan
    return medians


def ratio(numerator: float | None, denominator: float | None) -> float:
    if numerator is None or denominator is None or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    if denominator == 0:
        return math.nan if numerator == 0 else math.inf
    return numerator / denominator


def round_ratios(scenario: dict[str, Any], metric: str) -> list[float]:
    """SafeDB/reference round by round. The two servers of a round are measured back to back, so the spread
    of these ratios shows how far the machine's own drift moves a comparison."""
    rounds = scenario["rounds"]
    pairs = zip(rounds.get(SAFEDB, []), rounds.get(REFERENCE, []), strict=False)
    values = [ratio(ours.get(metric), theirs.get(metric)) for ours, theirs in pairs]
    return [value for value in values if not math.isnan(value)]


@dataclass(frozen=True)
class TargetStatus:
    target: str
    status: str
    """"met", "not met", or "not measured"."""
    detail: str


def _scenario(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in results["scenarios"] if s["name"] == name), None)


def _value(scenario: dict[str, Any], server: str, metric: str) -> float:
    """A median, NaN when missing (in a file that was written, NaN is null)."""
    value = scenario["median"].get(server, {}).get(metric)
    return math.nan if value is None else float(value)


def evaluate_targets(results: dict[str, Any], full: dict[str, Any]) -> list[TargetStatus]:
    """Where SafeDB (as shipped) stands against each target of issue 8; `full` is the full-size plan."""
    statuses: list[TargetStatus] = []

    def ratio_target(title: str, names: Sequence[str], metric: str, minimum: float) -> None:
        parts, verdicts = [], []
        for name in names:
            scenario = _scenario(results, name)
            if scenario is None:
                continue
            safedb, reference = _value(scenario, SAFEDB, metric), _value(scenario, REFERENCE, metric)
            value = ratio(safedb, reference)
            verdicts.append(value >= minimum)
            spread = round_ratios(scenario, metric)
            rounds = f"; single rounds {min(spread):.2f}x to {max(spread):.2f}x" if len(spread) > 1 else ""
            parts.append(f"{name}: {value:.2f}x ({safedb:,.0f} vs {reference:,.0f}{rounds})")
        statuses.append(_status(title, verdicts, parts))

    reads = ["read-2025", "read-2026", "read-new-2025", "read-new-2026"]
    ratio_target("Read path: SafeDB >= 0.95x the reference's calls/s", reads, "calls_per_s", 0.95)
    ratio_target(
        "Elicitation round trip: SafeDB >= 1.0x the reference", ["elicit-2025", "elicit-2026"], "round_trips_per_s", 1.0
    )

    big_modern = max(full["waiting_modern"])
    scenario = _scenario(results, f"waiting-2026-{big_modern}")
    if scenario is None:
        statuses.append(TargetStatus(f"{big_modern:,} waiting approvals (2026-07-28): < 10 MB growth", "not measured",
                                     "run without --quick"))  # fmt: skip
    else:
        growth = _value(scenario, SAFEDB, "rss_growth_waiting_mib")
        completed = _value(scenario, SAFEDB, "completed")
        statuses.append(
            _status(
                f"{big_modern:,} waiting approvals (2026-07-28): < 10 MB server memory growth",
                [growth * 1.048576 < 10 and completed == big_modern],
                [
                    f"growth {growth:.1f} MiB, {completed:,.0f}/{big_modern:,} completed (reference: "
                    f"{_value(scenario, REFERENCE, 'rss_growth_waiting_mib'):.1f} MiB)"
                ],
            )
        )
    handshake = max(full["waiting_handshake"])
    scenario = _scenario(results, f"waiting-2025-{handshake}")
    if scenario is None:
        statuses.append(
            TargetStatus("Handshake era: <= 130 KB per waiting call", "not measured", "run without --quick")
        )
    else:
        per_call = _value(scenario, SAFEDB, "rss_per_waiting_call_kib")
        completed = _value(scenario, SAFEDB, "completed")
        statuses.append(
            _status(
                f"Handshake era ({handshake:,} waiting): <= 130 KB server memory per waiting call",
                [per_call * 1.024 <= 130 and completed == handshake],
                [
                    f"{per_call:.1f} KiB ({per_call * 1.024:.1f} KB) per waiting call, {completed:,.0f}/{handshake:,} "
                    "completed (reference: "
                    f"{_value(scenario, REFERENCE, 'rss_per_waiting_call_kib'):.1f} KiB)"
                ],
            )
        )
    biggest = max(full["large_rows"])
    names = [f"large-{shape}-{biggest}" for shape in full["large_shapes"]]
    memory_parts, memory_verdicts, read_parts, read_verdicts = [], [], [], []
    for name in names:
        scenario = _scenario(results, name)
        if scenario is None:
            continue
        peak = _value(scenario, SAFEDB, "peak_rss_mib")
        growth = _value(scenario, SAFEDB, "peak_growth_mib")
        p99 = _value(scenario, SAFEDB, "small_read_p99_ms")
        memory_verdicts.append(peak * 1.048576 < 100)
        memory_parts.append(
            f"{name}: peak {peak:.0f} MiB, of which {growth:+.1f} MiB during the query (reference: peak "
            f"{_value(scenario, REFERENCE, 'peak_rss_mib'):.0f} MiB)"
        )
        read_verdicts.append(p99 < 50)
        reference_p99 = _value(scenario, REFERENCE, "small_read_p99_ms")
        read_parts.append(f"{name}: small read p99 {p99:.1f} ms (reference: {reference_p99:.1f} ms)")
    statuses.append(_status(f"{biggest:,}-row SELECT: server peak memory < 100 MB", memory_verdicts, memory_parts))
    statuses.append(_status(f"{biggest:,}-row SELECT: concurrent small read p99 < 50 ms", read_verdicts, read_parts))
    return statuses


def _status(title: str, verdicts: Sequence[bool], parts: Sequence[str]) -> TargetStatus:
    if not verdicts:
        return TargetStatus(title, "not measured", "run without --quick")
    return TargetStatus(title, "met" if all(verdicts) else "not met", "; ".join(parts))


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio_text(value: float) -> str:
    return "-" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.2f}x")


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    machine = meta["machine"]
    servers = meta["servers"]
    closed_loop_rounds = meta["plan"].get("closed_loop_rounds", meta["plan"]["rounds"])  # older files: one count
    lines = [
        "# Benchmarks",
        "",
        "SafeDB against a reference server, side by side, in one run. Generated by `python -m bench.run` "
        "(about 20 minutes; `--quick` for a smoke test that writes elsewhere); do not edit by hand. Raw numbers, "
        "every round included: `bench/results/latest.json` (`python -m bench.report` renders this page from it).",
        "",
        f"- Date: {meta['date']}; mode: {meta['mode']}; rounds per server: {closed_loop_rounds} for the read and "
        f"elicitation rates, {meta['plan']['rounds']} for the others (servers measured alternately, the order "
        "swapped every round: A B, B A). Every figure is the median over the rounds; a rate target also shows the "
        "range of the ratios of single rounds, which is how much the machine's drift moves a comparison.",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']:.1f} GiB RAM, "
        f"Linux {machine['kernel']}, {machine['filesystem']} work directory; Python {machine['python']}, "
        + ", ".join(f"{name} {version}" for name, version in machine["packages"].items())
        + (f"; checkout {machine['commit']}" if machine.get("commit") else "")
        + ".",
        "- Client and servers share the same cores: the load generator is one asyncio process (raw sockets, "
        "pre-built JSON-RPC bodies over keep-alive HTTP/1.1) and its own CPU per call is shown beside the "
        "server's. Loopback only (127.0.0.1). CPU and memory of each server come from /proc "
        "(utime+stime, VmRSS, VmHWM).",
        "",
        "Servers:",
        "",
    ]
    lines += [f"- `{name}`: {description}" for name, description in servers.items()]
    lines += [
        "",
        "Ratios are SafeDB/reference: above 1 means SafeDB's number is larger (better for rates, worse for "
        "latency, CPU, bytes and memory).",
    ]
    busy = _busiest_other_cpu(results)
    if busy > 0.2:
        lines += [
            "",
            f"**Caution:** other processes on the machine used up to {busy:.1f} of its {machine['cores']} cores "
            "during the measurement windows (row `other processes' CPU`). Absolute rates are depressed and noisy; "
            "the alternating rounds keep the comparison fair on average, but rerun on a quiet machine for "
            "figures to quote.",
        ]
    lines += ["", "## Targets", "", "| target | status | numbers |", "| --- | --- | --- |"]
    lines += [f"| {t['target']} | **{t['status']}** | {t['detail']} |" for t in results["targets"]]
    for family, heading in (
        ("read", "Read path"),
        ("elicit", "Elicitation round trip"),
        ("waiting", "Waiting approvals"),
        ("large", "Large results"),
    ):
        lines += ["", f"## {heading}", ""]
        for scenario in (s for s in results["scenarios"] if s["family"] == family):
            lines += _scenario_table(scenario, list(servers))
    lines += ["", "## Notes", ""]
    lines += [f"- {note}" for note in [*NOTES, *meta["notes"]]]
    return "\n".join(lines) + "\n"


def _busiest_other_cpu(results: dict[str, Any]) -> float:
    """The highest CPU (cores) other processes used during a measured window, over all closed-loop rounds."""
    busiest = 0.0
    for scenario in results["scenarios"]:
        for rounds in scenario["rounds"].values():
            for metrics in rounds:
                value = metrics.get("other_cpu_cores")
                if value is not None and not math.isnan(value):
                    busiest = max(busiest, value)
    return busiest


def _scenario_table(scenario: dict[str, Any], servers: list[str]) -> list[str]:
    header = ["metric", *servers, "safedb/reference"]
    lines = [f"### {scenario['title']}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for headline in scenario["headlines"]:
        metric = headline["metric"]
        row = [headline["label"]]
        row += [_number(_value(scenario, server, metric)) for server in servers]
        reference = _value(scenario, REFERENCE, metric)
        row.append(_ratio_text(ratio(_value(scenario, SAFEDB, metric), reference)))
        lines.append("| " + " | ".join(row) + " |")
    if any("other_cpu_cores" in scenario["median"].get(server, {}) for server in servers):
        row = ["other processes' CPU, cores"]
        row += [_number(_value(scenario, server, "other_cpu_cores")) for server in servers]
        row += [""]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Render a results file again: `python -m bench.report [RESULTS.json [PAGE.md]]`."""
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(
        prog="python -m bench.report",
        description="Render the Markdown page of a benchmark results file again (after a change in wording).",
    )
    parser.add_argument(
        "results", nargs="?", type=Path, default=here / "results" / "latest.json", help="default: %(default)s"
    )
    parser.add_argument(
        "page", nargs="?", type=Path, default=here.parent / "docs" / "benchmarks.md", help="default: %(default)s"
    )
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
        mode = results["meta"]["mode"]
    except OSError as exc:
        parser.error(f"cannot read {args.results}: {exc.strerror}")
    except (ValueError, KeyError, TypeError):
        parser.error(f"{args.results} is not a results file written by `python -m bench.run`")
    # Targets are derived from the medians: evaluate them again, so a change in wording reaches both files.
    if mode == "full":
        results["targets"] = [asdict(status) for status in evaluate_targets(results, results["meta"]["plan"])]
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    args.page.write_text(markdown(results))


if __name__ == "__main__":
    main()
