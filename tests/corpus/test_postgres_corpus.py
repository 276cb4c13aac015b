"""The PostgreSQL corpus (tests/corpus/postgres/*.toml), end to end through execute_query.

A real PostgreSQL server (started by the test) holds the fixture database (tests/corpus/postgres/fixture.sql),
owned by the writer role; SafeDB reads as the read-only role and writes as the writer. Every case is sent
by an SDK client of each protocol era (handshake era and 2026-07-28) whose elicitation callback declines.
One real `safedb serve` process serves the corpus database for the whole module.

Before and after every case a superuser connection snapshots schemas, every row of every user table,
sequences, roles, memberships, grants, settings (per role and database, and ALTER SYSTEM's file), large
objects and advisory locks: nothing may change, whatever the case expects. A connection of the reader role
must survive every case (nothing terminated it), and a listener on the corpus' channels must receive no
notification.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult

from tests.conftest_postgres import fresh_database
from tests.corpus.corpus import Case, check_declined_outcome, load_cases
from tests.helpers import Responder, ServerProcess, serving_process
from tests.postgres.snapshot import take_snapshot
from tests.postgres_server import READER, WRITER, PostgresServer

pytestmark = pytest.mark.anyio

CORPUS_DIR = Path(__file__).parent / "postgres"
CASES = load_cases(CORPUS_DIR)
MODES = ("legacy", "auto")
PROTOCOL_VERSIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
CHANNELS = ("jobs", "alerts")
CALL_SECONDS = 30


@dataclass
class Corpus:
    server: PostgresServer
    name: str
    admin: psycopg.Connection[Any]
    canary: psycopg.Connection[Any]
    listener: psycopg.Connection[Any]

    def notifications(self) -> list[str]:
        return [f"{n.channel}:{n.payload}" for n in self.listener.notifies(timeout=0.05)]


@pytest.fixture(scope="module")
def corpus(postgres_cluster: PostgresServer) -> Iterator[Corpus]:
    name = fresh_database(postgres_cluster, [(CORPUS_DIR / "fixture.sql").read_text(encoding="utf-8")])
    admin = postgres_cluster.connect(name)
    canary = postgres_cluster.connect(name, READER)
    listener = postgres_cluster.connect(name)
    try:
        for channel in CHANNELS:
            listener.execute(f"LISTEN {channel}".encode())
        yield Corpus(postgres_cluster, name, admin, canary, listener)
    finally:
        for connection in (admin, canary, listener):
            connection.close()
        postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pg-corpus-audit") / "audit.db"


@pytest.fixture(scope="module")
def served(corpus: Corpus, audit_path: Path) -> Iterator[ServerProcess]:
    command = [
        sys.executable, "-m", "safedb", "serve", "--port", "0", "--statement-timeout", "10",
        "--database", corpus.server.url(READER, corpus.name),
        "--writer-database", corpus.server.url(WRITER, corpus.name),
        "--audit-db", str(audit_path),
    ]  # fmt: skip
    with serving_process(command) as server:
        yield server


async def call(url: str, mode: str, responder: Responder, sql: str) -> CallToolResult:
    with anyio.fail_after(CALL_SECONDS):
        async with Client(url, mode=mode, elicitation_callback=responder) as client:
            assert client.protocol_version == PROTOCOL_VERSIONS[mode]
            return await client.call_tool("execute_query", {"query": sql})


def test_corpus_files_are_well_formed() -> None:
    names = Counter(case.name for case in CASES)
    assert [name for name, count in names.items() if count > 1] == []
    assert len(CASES) >= 120
    by_expectation = Counter(case.expect for case in CASES)
    assert by_expectation["run"] >= 40
    assert by_expectation["ask"] >= 60
    assert by_expectation["refuse"] >= 20
    assert {case.theme for case in CASES} >= {
        "reads", "data_changes", "ddl", "privileges_roles", "functions_and_code", "refusals", "tricks",
    }  # fmt: skip


def test_every_issue_item_is_covered() -> None:
    """The issue's list, item by item: at least one case whose SQL shows it."""
    items = {
        "data-modifying CTE": r"WITH \w+ AS \((DELETE|UPDATE|INSERT)",
        "SELECT INTO": r"SELECT .* INTO ",
        "CREATE TABLE AS": r"CREATE TABLE \w+ AS",
        "COPY": r"^COPY ",
        "COPY PROGRAM": r"PROGRAM",
        "GRANT": r"^GRANT ",
        "REVOKE": r"^REVOKE ",
        "role management": r"(CREATE|ALTER|DROP) (ROLE|USER)",
        "ALTER SYSTEM": r"ALTER SYSTEM",
        "SET ROLE": r"^SET ROLE",
        "SET SESSION AUTHORIZATION": r"SET SESSION AUTHORIZATION",
        "DO": r"^DO ",
        "CALL": r"^CALL ",
        "PREPARE": r"^PREPARE ",
        "EXECUTE": r"^EXECUTE ",
        "LOCK": r"^LOCK ",
        "LISTEN": r"^LISTEN ",
        "NOTIFY": r"^NOTIFY ",
        "EXPLAIN ANALYZE of a write": r"EXPLAIN .*ANALYZE.*(DELETE|UPDATE|INSERT)",
        "nextval": r"nextval\(",
        "setval": r"setval\(",
        "pg_terminate_backend": r"pg_terminate_backend",
        "pg_cancel_backend": r"pg_cancel_backend",
        "pg_read_file": r"pg_read_file",
        "pg_ls_dir": r"pg_ls_dir",
        "lo_*": r"lo_\w+\(",
        "dblink": r"dblink",
        "advisory locks": r"advisory_lock",
        "attribute notation": r"\(\w+\)\.\w+|\bu\.stamp\b",
        "FROM-clause function": r"FROM \w+\(",
        "transaction control": r"^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT)",
        "transaction_read_only": r"transaction_read_only",
        "EXPLAIN of a SELECT": r"^EXPLAIN (\(FORMAT|SELECT)",
        "catalog query": r"pg_catalog|information_schema|pg_class|pg_roles",
        "keywords inside strings": r"'DROP TABLE",
    }
    missing = [
        item for item, pattern in items.items() if not any(re.search(pattern, case.sql, re.I | re.M) for case in CASES)
    ]
    assert missing == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_declined(case: Case, mode: str, corpus: Corpus, served: ServerProcess, audit_path: Path) -> None:
    before = take_snapshot(corpus.admin)
    responder = Responder(action="decline")
    result = await call(served.url, mode, responder, case.sql)
    check_declined_outcome(case, result, responder, audit_path)

    assert take_snapshot(corpus.admin) == before
    assert corpus.canary.execute(b"SELECT 1").fetchone() == (1,), "a session was terminated"
    assert corpus.notifications() == []
