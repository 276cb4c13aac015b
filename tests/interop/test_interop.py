"""Real third-party MCP clients against a real `safedb serve`: each reads without being asked, is asked before a
DELETE, changes the database when it accepts and leaves it alone when it declines, in every protocol mode it
has, over Streamable HTTP and over stdio.

Each client is installed on first use into an environment of its own under `.cache/interop/`. Set
SAFEDB_REQUIRE_ALL=1 (CI does) to make an install failure a test failure rather than a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.interop.clients import ACCEPT, CASES, DECLINE, INVOICES_AFTER, Case, Client, Driver, run_case
from tests.interop.environments import ClientUnavailable
from tests.interop.results import record

pytestmark = pytest.mark.slow

_installed: dict[str, Driver | ClientUnavailable] = {}


def installed(client: Client) -> Driver:
    """The client's driver, installing the client once per session; skip (or fail in CI) when it cannot be."""
    if client.key not in _installed:
        try:
            _installed[client.key] = client.install()
        except ClientUnavailable as exc:
            _installed[client.key] = exc
    driver = _installed[client.key]
    if isinstance(driver, ClientUnavailable):
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail(f"{client.name} {client.version} is required (SAFEDB_REQUIRE_ALL=1) but unavailable: {driver}")
        pytest.skip(f"{client.name} {client.version} unavailable: {driver}")
    return driver


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_client_reads_and_asks_before_changes(case: Case, tmp_path: Path) -> None:
    driver = installed(case.client)
    run = run_case(case, tmp_path, driver)
    record("clients", case.id, run.summary())
    context = f"{case.id}: {run.problems()}\n--- driver output ---\n{run.output[-6000:]}"
    assert run.report is not None, context
    assert run.report["protocol_version"] == case.protocol_version, context
    steps = run.report["steps"]
    assert steps["read"]["elicitations"] == [], context
    assert [len(steps["accept"]["elicitations"]), len(steps["decline"]["elicitations"])] == [1, 1], context
    assert steps["accept"]["result"]["structured"]["status"] == "executed", context
    assert steps["decline"]["result"]["structured"]["status"] == "declined", context
    # What the database and the audit log say, read apart from the server.
    assert run.invoice_ids == INVOICES_AFTER, context
    assert ("executed", ACCEPT) in run.decisions, context
    assert ("declined", DECLINE) in run.decisions, context
    assert ("executed", DECLINE) not in run.decisions, context
    assert run.problems() == [], context
    assert run.returncode == 0, context
