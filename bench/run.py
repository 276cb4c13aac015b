"""Run every benchmark scenario against SafeDB and the reference server, alternately, and report.

    python -m bench.run            # full run: writes bench/results/latest.json and docs/benchmarks.md
    python -m bench.run --quick    # tiny counts, a smoke test of the whole pipeline (writes bench/results/quick.*)

Both servers run as subprocesses on free loopback ports over one fresh copy of a demo-like database (the
demo tables, a scratch table, and large tables). Each scenario is measured on every server in turn,
round after round (A B, B A, A B...): nine rounds for the read and elicitation rates, two for the rest.
Scenarios that measure memory start new server processes for every measurement; the others start them
once per scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import dataset, report, scenarios, servers
from bench.load import Metrics, Target
from bench.scenarios import Plan, Scenario
from bench.servers import REPO_ROOT, ServerKind, ServerProcess


def machine_info(workdir: Path) -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor() or "unknown CPU",
    )  # fmt: skip
    memory_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    packages = {}
    for name in ("mcp", "uvicorn", "starlette", "h11", "pydantic", "safedb-mcp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            packages[name] = metadata.version(name)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_kib / 1024 / 1024,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": packages,
        "filesystem": _filesystem(workdir),
        "commit": _commit(),
    }


def _filesystem(path: Path) -> str:
    """The type of the file system holding `path` (the longest matching mount point)."""
    best, kind = "", "unknown"
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and str(path).startswith(fields[1]) and len(fields[1]) > len(best):
            best, kind = fields[1], fields[2]
    return kind


def _commit() -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" (with uncommitted changes)" if dirty else "")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _target(server: ServerProcess) -> Target:
    return Target(server.host, server.port, server.pid)


def _brief(scenario: Scenario, metrics: Metrics) -> str:
    headline = scenario.headlines[0]
    return f"{headline.label} {metrics.get(headline.metric, math.nan):,.2f}"


class Runner:
    """Measures scenarios on every server in turn. Servers start once per scenario, for every measurement
    of a memory scenario, or (quick mode, `fresh_servers` off) once for the whole run."""

    def __init__(self, plan: Plan, kinds: list[ServerKind], database: Path, workdir: Path) -> None:
        self.plan = plan
        self.kinds = kinds
        self.database = database
        self.workdir = workdir
        self.serial = 0
        self.lasting = contextlib.ExitStack()
        self.run_wide: dict[str, ServerProcess] = {}

    def _start(self, stack: contextlib.ExitStack, kind: ServerKind) -> ServerProcess:
        self.serial += 1
        return stack.enter_context(servers.running(kind, self.database, self.workdir, self.serial))

    def close(self) -> None:
        self.lasting.close()

    async def measure(self, scenario: Scenario) -> dict[str, list[Metrics]]:
        rounds: dict[str, list[Metrics]] = {kind.name: [] for kind in self.kinds}
        with contextlib.ExitStack() as per_scenario:
            if not self.plan.fresh_servers:
                for kind in self.kinds:
                    if kind.name not in self.run_wide:
                        self.run_wide[kind.name] = self._start(self.lasting, kind)
                shared = self.run_wide
            elif scenario.fresh_server:
                shared = {}
            else:
                shared = {kind.name: self._start(per_scenario, kind) for kind in self.kinds}
            for number in range(scenario.rounds):
                # A B, then B A: a drift of the machine's speed during the scenario favours neither server.
                for kind in self.kinds if number % 2 == 0 else self.kinds[::-1]:
                    with contextlib.ExitStack() as own:
                        server = shared.get(kind.name) or self._start(own, kind)
                        started = time.perf_counter()
                        metrics = await scenario.run(_target(server))
                        if server.process.poll() is not None:
                            raise RuntimeError(f"{kind.name} exited during {scenario.name}:\n" + "".join(server.log))
                    rounds[kind.name].append(metrics)
                    _log(
                        f"  {scenario.name} round {number + 1} {kind.name}: {_brief(scenario, metrics)} "
                        f"({time.perf_counter() - started:.1f} s)"
                    )
        return rounds


def _scenario_result(scenario: Scenario, rounds: dict[str, list[Metrics]]) -> dict[str, Any]:
    medians = {name: report.median_metrics(values) for name, values in rounds.items()}
    ratios = {
        name: {
            headline.metric: report.ratio(medians[name].get(headline.metric), medians[report.REFERENCE].get(
                headline.metric))
            for headline in scenario.headlines
        }
        for name in medians
        if name != report.REFERENCE
    }  # fmt: skip
    return {
        "name": scenario.name,
        "family": scenario.family,
        "title": scenario.title,
        "params": scenario.params,
        "headlines": [asdict(headline) for headline in scenario.headlines],
        "rounds": rounds,
        "median": medians,
        "ratios": ratios,
    }


def _clean(value: Any) -> Any:
    """NaN and infinity as null, so the file is strict JSON."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


async def run(plan: Plan, mode: str, only: list[str]) -> dict[str, Any]:
    kinds = [servers.SAFEDB, servers.REFERENCE]
    notes: list[str] = []
    chosen = [s for s in scenarios.build(plan) if not only or any(s.name.startswith(prefix) for prefix in only)]
    workdir = Path(tempfile.mkdtemp(prefix="safedb-bench-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, True)
        _log(f"Building the database in {workdir} ...")
        database = dataset.build(workdir / "db", plan.large_rows)
        runner = Runner(plan, kinds, database, workdir)
        stack.callback(runner.close)
        results: dict[str, Any] = {
            "meta": {
                "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "mode": mode,
                "plan": asdict(plan),
                "machine": machine_info(workdir),
                "servers": {kind.name: kind.description for kind in kinds},
                "notes": notes,
            },
            "scenarios": [],
        }
        for scenario in chosen:
            _log(f"{scenario.name}: {scenario.title}")
            rounds = await runner.measure(scenario)
            results["scenarios"].append(_scenario_result(scenario, rounds))
    results["targets"] = [asdict(status) for status in report.evaluate_targets(results, asdict(scenarios.FULL))]
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke test of the whole pipeline")
    parser.add_argument(
        "--rounds",
        type=int,
        help="measurements per server and scenario (default: 9 for read and elicitation, 2 for the others; quick: 1)",
    )
    parser.add_argument("--only", nargs="*", default=[], help="run only scenarios whose name starts with these")
    parser.add_argument("--json", type=Path, help="where to write the results (default by mode)")
    parser.add_argument("--markdown", type=Path, help="where to write the Markdown page (default by mode)")
    args = parser.parse_args(argv)
    plan = scenarios.QUICK if args.quick else scenarios.FULL
    if args.rounds is not None:
        plan = Plan(**{**asdict(plan), "rounds": args.rounds, "closed_loop_rounds": args.rounds})
    mode = "quick" if args.quick else "full"
    results_dir = Path(__file__).resolve().parent / "results"
    json_path = args.json or results_dir / ("quick.json" if args.quick else "latest.json")
    markdown_path = args.markdown or (results_dir / "quick.md" if args.quick else REPO_ROOT / "docs" / "benchmarks.md")
    results = _clean(asyncio.run(run(plan, mode, args.only)))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(report.markdown(results))
    _log(f"Wrote {json_path} and {markdown_path}")
    for status in results["targets"]:
        _log(f"  [{status['status']}] {status['target']}: {status['detail']}")


if __name__ == "__main__":
    main()
