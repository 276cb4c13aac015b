"""The official conformance suite's server leg against a real `safedb serve`, and what its results say.

The harness runs as `conformance server --url URL --requirements ERA --expected-failures FILE -o DIR`. It only
connects to the server under test (it starts no listeners), so it runs in the host's network namespace and
reaches the server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from safedb.db.demo import ensure_demo_database
from tests.client.conformance import SUITE, Harness
from tests.helpers import safedb_serve

ERAS = ("2025-11-25", "2026-07-28")
EXPECTED_FAILURES = Path(__file__).resolve().parent / "conformance-expected-failures.yaml"
NOT_PASSING = frozenset({"FAILURE", "WARNING"})
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_ENTRY = re.compile(r"^\s+-\s+(?P<entry>\S+)\s*$")


@dataclass(frozen=True)
class Scenario:
    name: str
    passed: frozenset[str]
    """Ids of the checks that succeeded."""
    failing: frozenset[str]
    """Ids of the checks that failed or warned (the harness's baseline counts warnings as failures)."""


@dataclass(frozen=True)
class ConformanceRun:
    era: str
    returncode: int
    output: str
    scenarios: dict[str, Scenario]

    def unexpected(self, expected: dict[str, str]) -> dict[str, list[str]]:
        """Failing checks that no entry of the expected-failures file covers, by scenario."""
        found = {}
        for scenario in self.scenarios.values():
            if scenario.name in expected:
                continue
            left = sorted(check for check in scenario.failing if f"{scenario.name}:{check}" not in expected)
            if left:
                found[scenario.name] = left
        return found

    def failing_entries(self, expected: dict[str, str]) -> set[str]:
        """The entries of the expected-failures file that did fail in this run."""
        failing = set()
        for entry in expected:
            name, _, check = entry.partition(":")
            scenario = self.scenarios.get(name)
            if scenario is not None and (check in scenario.failing if check else scenario.failing):
                failing.add(entry)
        return failing

    def summary(self, expected: dict[str, str]) -> dict[str, object]:
        return {
            "suite": SUITE,
            "era": self.era,
            "returncode": self.returncode,
            "scenarios": len(self.scenarios),
            "passed": sorted(name for name, scenario in self.scenarios.items() if not scenario.failing),
            "expected_failures": sorted(self.failing_entries(expected)),
            "unexpected": self.unexpected(expected),
        }


def load_expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """Entries of the expected-failures file (a YAML list under `server:`), each with the reason given in the
    comment block above it."""
    entries: dict[str, str] = {}
    reason: list[str] = []
    in_group = False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and line.startswith("  "):
            if in_group:
                reason, in_group = [], False
            reason.append(stripped.lstrip("#").strip())
        elif match := _ENTRY.match(line):
            entries[match["entry"]] = " ".join(reason).removeprefix("Reason").lstrip(": ")
            in_group = True
    return entries


def run_server_leg(harness: Harness, era: str, workdir: Path) -> ConformanceRun:
    """Serve a fresh demo database and run every scenario the `era` revision requires against it."""
    database = ensure_demo_database(workdir / "data")
    output = workdir / "results"
    with safedb_serve(database) as server:
        command = [
            str(harness.node), str(harness.cli), "server", "--url", server.url, "--requirements", era,
            "--expected-failures", str(EXPECTED_FAILURES), "-o", str(output),
        ]  # fmt: skip
        run = subprocess.run(command, capture_output=True, text=True, timeout=480, check=False)
    return ConformanceRun(era, run.returncode, run.stdout + run.stderr, read_scenarios(output))


def read_scenarios(output: Path) -> dict[str, Scenario]:
    scenarios = {}
    for path in sorted(output.glob("*/checks.json")):
        match = _RESULT_DIR.match(path.parent.name)
        if match is None:
            continue
        checks = json.loads(path.read_text())
        scenarios[match["scenario"]] = Scenario(
            name=match["scenario"],
            passed=frozenset(check["id"] for check in checks if check.get("status") == "SUCCESS"),
            failing=frozenset(check["id"] for check in checks if check.get("status") in NOT_PASSING),
        )
    return scenarios
