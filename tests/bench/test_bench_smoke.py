"""The benchmark pipeline end to end in its quick mode: both servers start, every scenario runs against
both, and the results file and the Markdown page are written. Numbers are checked for presence, never
for speed (benchmarks are measured, not asserted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"read", "elicit", "waiting", "large"}
SERVERS = {"safedb", "reference"}


@pytest.mark.slow
def test_quick_run_reports_every_scenario_for_both_servers(tmp_path: Path) -> None:
    results_path, markdown_path = tmp_path / "results.json", tmp_path / "benchmarks.md"
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--json", str(results_path),
         "--markdown", str(markdown_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr

    results = json.loads(results_path.read_text())
    scenarios = results["scenarios"]
    assert {scenario["family"] for scenario in scenarios} == FAMILIES
    names = {scenario["name"] for scenario in scenarios}
    assert {"read-2025", "read-2026", "read-new-2025", "read-new-2026", "elicit-2025", "elicit-2026"} <= names
    assert any(name.startswith("waiting-2026-") for name in names)
    assert any(name.startswith("waiting-2025-") for name in names)
    assert any(name.startswith("large-scan-") for name in names)
    assert any(name.startswith("large-sorted-") for name in names)
    for scenario in scenarios:
        assert set(scenario["median"]) == SERVERS, scenario["name"]
        for server in SERVERS:
            for headline in scenario["headlines"]:
                value = scenario["median"][server][headline["metric"]]
                assert isinstance(value, int | float), (scenario["name"], server, headline["metric"])
                assert math.isfinite(value), (scenario["name"], server, headline["metric"])
        assert "safedb" in scenario["ratios"]
    for scenario in scenarios:
        if scenario["family"] == "waiting":
            for server in SERVERS:
                assert scenario["median"][server]["completed"] == scenario["params"]["waiting"]
        if scenario["family"] in {"read", "elicit"}:
            for server in SERVERS:
                assert scenario["median"][server]["errors"] == 0
    assert len(results["targets"]) == 6
    assert {target["status"] for target in results["targets"]} <= {"met", "not met", "not measured"}

    page = markdown_path.read_text()
    assert "| metric | safedb | reference | safedb/reference |" in page
    assert "## Targets" in page
