"""How a run's rounds become the figures and target verdicts of the benchmark page."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench import report, scenarios


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
