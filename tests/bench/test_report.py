"""How a run's rounds become the figures and target verdicts of the benchmark page."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from bench import report, scenarios

REPO_ROOT = Path(__file__).resolve().parents[2]


def _rate_scenario(name: str, safedb: list[float], reference: list[float]) -> dict[str, Any]:
    rounds = {
        report.SAFEDB: [{"calls_per_s": value} for value in safedb],
        report.REFERENCE: [{"calls_per_s": value} for value in reference],
    }
    return {
        "name": name,
        "rounds": rounds,
        "median": {server: report.median_metrics(values) for server, values in rounds.items()},
    }


def test_round_ratios_pair_the_servers_round_by_round() -> None:
    scenario = _rate_scenario("read-2025", [100, 90, 120], [100, 60, 100])

    assert report.round_ratios(scenario, "calls_per_s") == [1.0, 1.5, 1.2]


def test_round_ratios_leave_out_rounds_without_a_figure() -> None:
    scenario = _rate_scenario("read-2025", [100, 90], [0, 45])
    scenario["rounds"][report.REFERENCE][0] = {}

    assert report.round_ratios(scenario, "calls_per_s") == [2.0]


def test_a_rate_target_is_judged_on_the_medians_and_shows_the_spread_of_single_rounds() -> None:
    results = {
        "scenarios": [
            _rate_scenario("read-2025", [90, 100, 120], [100, 100, 100]),
            _rate_scenario("read-2026", [80, 90, 100], [100, 100, 100]),
        ]
    }

    read_target = report.evaluate_targets(results, asdict(scenarios.FULL))[0]

    assert read_target.status == "not met"  # read-2026's median is 0.90x, though one round reached 1.00x
    assert "read-2025: 1.00x (100 vs 100; single rounds 0.90x to 1.20x)" in read_target.detail
    assert "read-2026: 0.90x (90 vs 100; single rounds 0.80x to 1.00x)" in read_target.detail


def test_rendering_the_committed_results_again_gives_the_committed_page(tmp_path: Path) -> None:
    """docs/benchmarks.md is generated: `python -m bench.report` on its results file reproduces it."""
    results, page = tmp_path / "latest.json", tmp_path / "benchmarks.md"
    shutil.copy(REPO_ROOT / "bench" / "results" / "latest.json", results)

    report.main([str(results), str(page)])

    assert page.read_text() == (REPO_ROOT / "docs" / "benchmarks.md").read_text()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("not json", "is not a results file written by `python -m bench.run`"),
        ('{"scenarios": []}', "is not a results file written by `python -m bench.run`"),
    ],
)
def test_a_missing_or_foreign_results_file_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    results, page = tmp_path / "results.json", tmp_path / "page.md"
    if content is not None:
        results.write_text(content)

    with pytest.raises(SystemExit) as exit_info:
        report.main([str(results), str(page)])

    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in error
    assert str(results) in error
    assert not page.exists()
