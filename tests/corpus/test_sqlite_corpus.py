"""The adversarial SQLite corpus, end to end through execute_query.

Declined run: one real `safedb serve` process on a copy of the fixture database; every case is sent by
an SDK client of each protocol era (handshake era and 2026-07-28) whose elicitation callback declines.
A separate read-only connection snapshots the database (schema, every row, file-level pragmas, the
files beside it) before and after each case: nothing may change, whatever the case expects.

Accepted run: for every must-ask case, a fresh copy of the fixture behind an in-process server whose
client approves; the statement must run on the writer path and its effect must show.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult

from safedb.audit import SqliteAuditStore
from safedb.db.sqlite import SqliteDatabase
from safedb.server.app import build_server
from safedb.settings import Settings
from tests.corpus.corpus import (
    Case,
    CorpusError,
    build_fixture,
    check_declined_outcome,
    load_cases,
    same_statement,
    text_of,
)
from tests.helpers import Responder, ServerProcess, audit_decisions, database_snapshot, safedb_serve

pytestmark = pytest.mark.anyio

CASES = load_cases()
ASK_CASES = [case for case in CASES if case.expect == "ask" and case.accept_check]
MODES = ("legacy", "auto")
PROTOCOL_VERSIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
CALL_SECONDS = 30


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture(tmp_path_factory.mktemp("corpus-fixture") / "corpus.db")


@pytest.fixture(scope="module")
def served_db(fixture_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The copy the shared server serves, alone in its directory so that any new file shows."""
    return Path(shutil.copy2(fixture_db, tmp_path_factory.mktemp("corpus-served") / "corpus.db"))


@pytest.fixture(scope="module")
def served_audit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared server's audit log, kept away from the database's directory."""
    return tmp_path_factory.mktemp("corpus-audit") / "audit.db"


@pytest.fixture(scope="module")
def served(served_db: Path, served_audit: Path) -> Iterator[ServerProcess]:
    with safedb_serve(served_db, env={"SAFEDB_AUDIT_DB": str(served_audit)}) as server:
        yield server


async def call(target: Any, mode: str, responder: Responder, sql: str) -> CallToolResult:
    with anyio.fail_after(CALL_SECONDS):
        async with Client(target, mode=mode, elicitation_callback=responder) as client:
            assert client.protocol_version == PROTOCOL_VERSIONS[mode]
            return await client.call_tool("execute_query", {"query": sql})


def test_corpus_files_are_well_formed() -> None:
    names = Counter(case.name for case in CASES)
    assert [name for name, count in names.items() if count > 1] == []
    assert len(CASES) >= 150
    by_expectation = Counter(case.expect for case in CASES)
    assert set(by_expectation) == {"run", "ask", "refuse"}
    assert by_expectation["run"] >= 50
    assert {case.theme for case in CASES} >= {"reads", "data_changes", "ddl", "database_level", "tricks", "refusals"}


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ('name = "x"\nsql = "SELECT 1"\nexpect = "maybe"', "expect must be one of"),
        ('name = "x"\nsql = "DELETE FROM t"\nexpect = "ask"\nkinds = ["explode"]', "explode"),
        ('name = "x"\nsql = "SELECT 1"\nexpect = "run"\nerror_contains = "no"', "do not apply"),
        ('name = "x"\nsqll = "SELECT 1"\nexpect = "run"', "unknown fields"),
        ('name = "two words"\nsql = "SELECT 1"\nexpect = "run"', "name must be"),
    ],
    ids=["bad-expect", "bad-kind", "misplaced-field", "typo-field", "bad-name"],
)
def test_malformed_cases_are_rejected(tmp_path: Path, body: str, complaint: str) -> None:
    (tmp_path / "bad.toml").write_text("[[case]]\n" + body + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=complaint):
        load_cases(tmp_path)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_declined(case: Case, mode: str, served: ServerProcess, served_db: Path, served_audit: Path) -> None:
    before = database_snapshot(served_db)
    responder = Responder(action="decline")
    result = await call(served.url, mode, responder, case.sql)
    check_declined_outcome(case, result, responder, served_audit)

    assert database_snapshot(served_db) == before


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ASK_CASES, ids=[case.name for case in ASK_CASES])
async def test_approved_change_takes_effect(case: Case, mode: str, fixture_db: Path, tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    path = Path(shutil.copy2(fixture_db, tmp_path / "db" / "corpus.db"))
    before = database_snapshot(path)
    settings = Settings()
    database = SqliteDatabase(path, settings.limits)
    audit = SqliteAuditStore.open(tmp_path / "audit.db")
    try:
        responder = Responder(action="accept")
        result = await call(build_server(settings, {"default": database}, audit), mode, responder, case.sql)
        decisions = audit_decisions(audit)
    finally:
        await database.aclose()
        audit.close()
    text = text_of(result)
    assert len(responder.asked) == 1, f"a change ran without asking: {text}"
    assert not result.is_error, f"the approved statement failed: {text}"
    assert result.structured_content is not None
    assert result.structured_content["status"] == "executed", text
    assert result.structured_content["executed"] is True
    assert any(decision == "accepted" and same_statement(sql, case.sql) for decision, sql in decisions)
    assert decisions[-1][0] == "executed"
    assert same_statement(decisions[-1][1], case.sql)
    if case.accept_visible:
        assert database_snapshot(path) != before, "the approved statement reported success but changed nothing"
