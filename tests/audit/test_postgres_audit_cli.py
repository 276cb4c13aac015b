"""`safedb audit init|list|verify|export --audit-db postgresql://...` as a user runs them, password unprinted."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from safedb.audit.chain import GENESIS_HASH, chain_hash
from tests.audit.helpers import fill, run_audit
from tests.audit.stores import PostgresLog
from tests.postgres_server import WRITER, PostgresServer, free_port

pytestmark = pytest.mark.slow


def _assert_no_password(log: PostgresLog, result: subprocess.CompletedProcess[str]) -> None:
    password = log.server.passwords[log.role]
    assert password not in result.stdout
    assert password not in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_intact(postgres_log: PostgresLog) -> None:
    records = fill(postgres_log, 5)
    result = run_audit("verify", "--audit-db", postgres_log.location)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Audit log intact: 5 records; last record 5, hash {records[-1].hash}.\n"
    _assert_no_password(postgres_log, result)


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        ("UPDATE audit_log SET sql = 'SELECT 1' WHERE seq = 3", "record 3 was edited"),
        ("DELETE FROM audit_log WHERE seq = 2", "record 2 was deleted"),
        ("DELETE FROM audit_log WHERE seq = 5", "record 5 was deleted"),
        (
            "INSERT INTO audit_log SELECT 6, time, decision, request_id, target, caller, sql, classification, "
            "changes, justification, environment, rows_affected, error, hash, hash FROM audit_log WHERE seq = 5",
            "record 6 was inserted",
        ),
    ],
    ids=["edited", "deleted-middle", "deleted-last", "inserted"],
)
def test_verify_names_the_tampered_record(postgres_log: PostgresLog, tamper: str, expected: str) -> None:
    fill(postgres_log, 5)
    with postgres_log.tampering() as db:
        db.execute(tamper)
    result = run_audit("verify", "--audit-db", postgres_log.location)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith(f"Audit log NOT intact: {expected}")
    assert result.stdout.count("\n") == 1
    _assert_no_password(postgres_log, result)


def test_audit_db_url_from_the_environment_and_export(postgres_log: PostgresLog) -> None:
    written = fill(postgres_log, 4)
    result = run_audit("export", env={"SAFEDB_AUDIT_DB": postgres_log.location})
    assert result.returncode == 0, result.stderr
    previous = GENESIS_HASH
    lines = result.stdout.splitlines()
    assert [json.loads(line) for line in lines] == [record.to_dict() for record in written]
    for line in lines:
        data = json.loads(line)
        assert data["prev_hash"] == previous
        assert chain_hash({key: value for key, value in data.items() if key != "hash"}) == data["hash"]
        previous = data["hash"]
    listed = run_audit("list", "--audit-db", postgres_log.location, "--decision", "requested", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [record["seq"] for record in json.loads(listed.stdout)] == [1]
    _assert_no_password(postgres_log, listed)


def test_init_creates_the_schema_once(postgres_log: PostgresLog) -> None:
    first = run_audit("init", "--audit-db", postgres_log.location)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Audit log ready. Audit log intact: 0 records.\n"
    fill(postgres_log, 2)
    again = run_audit("init", "--audit-db", postgres_log.location)
    assert again.returncode == 0, again.stderr
    assert "Audit log intact: 2 records" in again.stdout
    _assert_no_password(postgres_log, again)


@pytest.mark.parametrize("command", ["list", "verify", "export"])
def test_missing_schema_unreachable_server_and_wrong_password(postgres_log: PostgresLog, command: str) -> None:
    result = run_audit(command, "--audit-db", postgres_log.location)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Audit log not found: {WRITER}@127.0.0.1:" in result.stderr
    _assert_no_password(postgres_log, result)

    server: PostgresServer = postgres_log.server
    unreachable = postgres_log.location.replace(f":{server.port}/", f":{free_port()}/")
    result = run_audit(command, "--audit-db", unreachable)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Cannot connect to the PostgreSQL audit log at {WRITER}@127.0.0.1:" in result.stderr
    _assert_no_password(postgres_log, result)

    wrong = postgres_log.location.replace(server.passwords[WRITER], "wrong-secret")
    result = run_audit(command, "--audit-db", wrong)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "password authentication failed" in result.stderr
    assert "wrong-secret" not in result.stderr


def test_a_schema_that_is_not_an_audit_log(postgres_log: PostgresLog) -> None:
    public = postgres_log.location.replace(f"audit_schema={postgres_log.schema}", "audit_schema=pg_catalog")
    result = run_audit("verify", "--audit-db", public)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Schema pg_catalog in" in result.stderr
    assert "is not a SafeDB audit log" in result.stderr
    _assert_no_password(postgres_log, result)


@pytest.mark.parametrize("option", ["--request", "--target"])
@pytest.mark.parametrize("command", ["list", "export"])
def test_a_filter_that_is_not_utf8_is_an_invalid_option(postgres_log: PostgresLog, command: str, option: str) -> None:
    """psycopg cannot encode bytes that are not UTF-8 (held by Python as lone surrogates) as a query parameter."""
    fill(postgres_log, 2)
    result = run_audit(command, "--audit-db", postgres_log.location, option, os.fsdecode(b"req\xff"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Error: Invalid value for '{option}': 'req\\udcff' is not UTF-8 text" in result.stderr
    assert result.stdout == ""
    _assert_no_password(postgres_log, result)
