"""The official MCP conformance suite's server scenarios against `safedb serve`, for the 2025-11-25 and the
2026-07-28 requirements: everything passes but the documented expected failures (conformance-expected-failures.yaml),
and each documented failure still fails.

Set SAFEDB_REQUIRE_ALL=1 (CI does) to make a missing Node or npm package a failure rather than a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.client.conformance import Harness, HarnessUnavailable, install_suite
from tests.interop.conformance_server import ERAS, ConformanceRun, load_expected_failures, run_server_leg
from tests.interop.results import record

pytestmark = pytest.mark.slow

# Scenarios that need nothing but a correct server: each must run and pass (all but the per-check entries).
MUST_PASS = {
    "2025-11-25": {
        "server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-error", "prompts-list",
        "resources-list", "dns-rebinding-protection", "server-sse-multiple-streams", "server-session-lifecycle",
    },
    "2026-07-28": {
        "server-stateless", "tools-list", "tools-call-simple-text", "tools-call-error", "prompts-list",
        "resources-list", "sep-2164-resource-not-found", "dns-rebinding-protection", "caching",
        "http-header-validation", "server-sse-multiple-streams", "input-required-result-unsupported-methods",
        "input-required-result-ignore-extra-params", "input-required-result-validate-input",
        "input-required-result-missing-input-response",
    },
}  # fmt: skip

EXPECTED = load_expected_failures()


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    try:
        yield install_suite()
    except HarnessUnavailable as exc:
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail(f"The conformance suite is required (SAFEDB_REQUIRE_ALL=1) but unavailable: {exc}")
        pytest.skip(f"conformance suite unavailable: {exc}")


@pytest.fixture(scope="module")
def runs(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> dict[str, ConformanceRun]:
    """Both eras, each against a `safedb serve` of its own on a fresh demo database."""
    results = {}
    for era in ERAS:
        run = run_server_leg(harness, era, tmp_path_factory.mktemp(f"conformance-{era}"))
        record("conformance", era, run.summary(EXPECTED))
        results[era] = run
    return results


def test_every_expected_failure_has_a_reason() -> None:
    assert len(EXPECTED) > 20
    assert all(reason for reason in EXPECTED.values()), EXPECTED
    assert not any(name in EXPECTED for names in MUST_PASS.values() for name in names)


@pytest.mark.parametrize("era", ERAS)
def test_everything_but_the_expected_failures_passes(runs: dict[str, ConformanceRun], era: str) -> None:
    run = runs[era]
    report = f"harness exit {run.returncode}\n{run.output[-6000:]}"
    assert len(run.scenarios) > 25, report
    assert run.unexpected(EXPECTED) == {}, report
    for name in MUST_PASS[era]:
        scenario = run.scenarios.get(name)
        assert scenario is not None, f"{name} did not run\n{report}"
        assert scenario.passed, f"{name} passed no check\n{report}"
        assert all(f"{name}:{check}" in EXPECTED for check in scenario.failing), f"{name}\n{report}"
    # The harness applies the same file to the scenarios the revision scores, and exits 0 only when nothing
    # else failed and no entry has gone stale.
    assert run.returncode == 0, report


def test_each_expected_failure_still_fails(runs: dict[str, ConformanceRun]) -> None:
    failing = set().union(*(run.failing_entries(EXPECTED) for run in runs.values()))
    assert sorted(set(EXPECTED) - failing) == [], "these now pass: remove them from the expected-failures file"
