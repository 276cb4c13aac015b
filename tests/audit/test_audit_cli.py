"""`safedb audit list|verify|export` as a user runs them: a real subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.servers import serving_process
from safedb.audit import AuditDecision, SqliteAuditStore
from safedb.audit.chain import GENESIS_HASH, chain_hash
from tests.audit.helpers import event, fill, run_audit, tampering

pytestmark = pytest.mark.slow


def _assert_clean_failure(result: subprocess.CompletedProcess[str], code: int, message: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_intact(audit_path: Path) -> None:
    records = fill(audit_path, 5)
    result = run_audit("verify", "--audit-db", str(audit_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Audit log intact: 5 records; last record 5, hash {records[-1].hash}.\n"


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
def test_verify_names_the_tampered_record(audit_path: Path, tamper: str, expected: str) -> None:
    fill(audit_path, 5)
    with tampering(audit_path) as db:
        db.execute(tamper)
    result = run_audit("verify", "--audit-db", str(audit_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith(f"Audit log NOT intact: {expected}")
    assert result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_init_of_a_tampered_log_does_not_call_it_ready(audit_path: Path) -> None:
    fill(audit_path, 3)
    with tampering(audit_path) as db:
        db.execute("UPDATE audit_log SET sql = 'SELECT 1' WHERE seq = 2")
    result = run_audit("init", "--audit-db", str(audit_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("Audit log NOT intact: record 2 was edited")
    intact = run_audit("init", "--audit-db", str(audit_path.parent / "fresh.db"))
    assert intact.stdout == "Audit log ready. Audit log intact: 0 records.\n"


def test_audit_db_from_the_environment(audit_path: Path) -> None:
    fill(audit_path, 2)
    result = run_audit("verify", env={"SAFEDB_AUDIT_DB": str(audit_path)})
    assert result.returncode == 0, result.stderr
    assert "intact: 2 records" in result.stdout


def test_default_location_is_the_data_dir(tmp_path: Path) -> None:
    data_home = tmp_path / "xdg"
    fill(data_home / "safedb" / "audit.db", 3)
    result = run_audit("verify", env={"XDG_DATA_HOME": str(data_home)})
    assert result.returncode == 0, result.stderr
    assert "intact: 3 records" in result.stdout


@pytest.mark.parametrize("how", ["data-dir", "config"])
def test_finds_the_log_where_the_server_keeps_it(tmp_path: Path, demo_db: Path, how: str) -> None:
    """A server given SAFEDB_DATA_DIR or --config keeps its log there; `safedb audit` looked only in the user data
    directory, so it reported on another log (or none) while the server's went unchecked."""
    config = tmp_path / "config" / "safedb.toml"
    config.parent.mkdir()
    config.write_text(f'[server]\naudit_db = "audit.db"\n[targets.app]\ndatabase = "{demo_db}"\n', encoding="utf-8")
    server_options, audit_options, env = {
        "data-dir": ([], [], {"SAFEDB_DATA_DIR": str(tmp_path / "data")}),
        "config": (["--config", str(config)], ["--config", str(config)], {}),
    }[how]
    env = {**env, "XDG_DATA_HOME": str(tmp_path / "xdg")}  # the user data directory, which must stay unused
    serve = [sys.executable, "-m", "safedb", "serve", "--port", "0", *server_options]
    with serving_process(serve, env=env) as server:
        call = subprocess.run(
            [sys.executable, "-m", "safedb", "call", "--decline-all", server.url, "execute_query",
             "query=DELETE FROM invoices"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert "declined" in call.stdout, call.stdout + call.stderr
    listed = run_audit("list", "--json", *audit_options, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [(r["decision"], r["sql"]) for r in json.loads(listed.stdout)] == [
        ("requested", "DELETE FROM invoices"),
        ("declined", "DELETE FROM invoices"),
    ]
    assert run_audit("verify", *audit_options, env=env).stdout.startswith("Audit log intact: 2 records")
    assert not (tmp_path / "xdg").exists()


@pytest.mark.parametrize("command", ["list", "verify", "export"])
def test_missing_file(audit_path: Path, command: str) -> None:
    result = run_audit(command, "--audit-db", str(audit_path))
    _assert_clean_failure(result, 2, f"Audit log not found: {audit_path}")
    assert not audit_path.exists()


@pytest.mark.parametrize("command", ["list", "verify", "export"])
def test_not_an_audit_database(tmp_path: Path, command: str) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("hello\n" * 500)
    _assert_clean_failure(run_audit(command, "--audit-db", str(bogus)), 2, "is not a SafeDB audit log")
    other = tmp_path / "app.db"
    connection = sqlite3.connect(other)
    try:
        connection.execute("CREATE TABLE users (id INTEGER)")
        connection.commit()
    finally:
        connection.close()
    _assert_clean_failure(run_audit(command, "--audit-db", str(other)), 2, "is not a SafeDB audit log")


def test_list_with_filters(audit_path: Path) -> None:
    with SqliteAuditStore.open(audit_path) as store:
        store.append(event(AuditDecision.REQUESTED, 1, target="alpha"))
        store.append(event(AuditDecision.ACCEPTED, 1, target="alpha"))
        store.append(event(AuditDecision.EXECUTED, 1, target="alpha"))
        store.append(event(AuditDecision.REQUESTED, 2, target="beta"))
        store.append(event(AuditDecision.DECLINED, 2, target="beta"))
    db = ("--audit-db", str(audit_path))

    result = run_audit("list", *db)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["SEQ", "TIME", "DECISION", "TARGET", "CALLER", "ROWS", "SQL"]
    assert [line.split()[2] for line in lines[1:]] == ["requested", "accepted", "executed", "requested", "declined"]
    assert "DELETE FROM invoices WHERE id = 1" in lines[3]

    result = run_audit("list", *db, "--target", "beta", "--json")
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert [(r["seq"], r["decision"], r["target"]) for r in records] == [
        (4, "requested", "beta"),
        (5, "declined", "beta"),
    ]

    result = run_audit("list", *db, "--decision", "executed", "--decision", "declined", "--json")
    assert [r["seq"] for r in json.loads(result.stdout)] == [3, 5]

    result = run_audit("list", *db, "--limit", "2", "--json")
    assert [r["seq"] for r in json.loads(result.stdout)] == [4, 5]

    result = run_audit("list", *db, "--since", "2000-01-01", "--until", "2000-01-02")
    assert result.returncode == 0
    assert result.stdout == ""
    assert "No audit records match." in result.stderr

    result = run_audit("list", *db, "--since", "2000-01-01T00:00Z", "--json")
    assert len(json.loads(result.stdout)) == 5


def test_list_json_is_one_indented_array_written_record_by_record(audit_path: Path) -> None:
    """`list --json` streams its array (a log's every record with `--limit 0` is not held in memory) in the same
    layout as one `json.dumps(..., indent=2)`: an empty array, one record, several."""
    db = ("--audit-db", str(audit_path))
    with SqliteAuditStore.open(audit_path):
        pass
    result = run_audit("list", *db, "--limit", "0", "--json")
    assert (result.returncode, result.stdout) == (0, "[]\n"), result.stderr
    for count in (1, 3):
        fill(audit_path, count)
        result = run_audit("list", *db, "--limit", "0", "--json")
        assert result.returncode == 0, result.stderr
        records = json.loads(result.stdout)
        assert len(records) == {1: 1, 3: 4}[count]
        assert result.stdout == json.dumps(records, indent=2, ensure_ascii=False) + "\n"
        assert "\n    " in result.stdout  # nested values are indented within the array


@pytest.mark.parametrize("command", ["verify", "list", "export"])
def test_a_log_damaged_past_its_first_page_is_one_line_and_exit_2(audit_path: Path, command: str) -> None:
    """Opening reads the first page only: a damaged page further on ended in a traceback (and `verify` in exit 1,
    which says the chain was tampered with)."""
    fill(audit_path, 300)
    with audit_path.open("r+b") as log:
        log.seek(4096)
        log.write(b"\xde\xad\xbe\xef" * 64)
    result = run_audit(command, "--audit-db", str(audit_path))
    _assert_clean_failure(result, 2, "cannot be read: database disk image is malformed")


def test_list_refuses_a_bad_time(audit_path: Path) -> None:
    fill(audit_path, 1)
    result = run_audit("list", "--audit-db", str(audit_path), "--since", "yesterday")
    _assert_clean_failure(result, 2, "is not an ISO 8601 date or time")


def test_export_jsonl_to_stdout_has_every_record_and_rebuilds_the_chain(audit_path: Path) -> None:
    written = fill(audit_path, len(AuditDecision) * 2)
    result = run_audit("export", "--format", "jsonl", "--audit-db", str(audit_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(written)
    previous = GENESIS_HASH
    for line, record in zip(lines, written, strict=True):
        data = json.loads(line)
        assert data == record.to_dict()
        assert list(data) == [*record.content(), "hash"]
        assert data["prev_hash"] == previous
        assert chain_hash({key: value for key, value in data.items() if key != "hash"}) == data["hash"]
        previous = data["hash"]
    assert {json.loads(line)["decision"] for line in lines} == {decision.value for decision in AuditDecision}


def test_export_to_a_file(audit_path: Path, tmp_path: Path) -> None:
    fill(audit_path, 4)
    output = tmp_path / "export.jsonl"
    result = run_audit("export", "--audit-db", str(audit_path), "--output", str(output), "--decision", "requested")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert f"Exported 1 record to {output}." in result.stderr
    (line,) = output.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["seq"] == 1


def test_export_refuses_other_formats(audit_path: Path) -> None:
    fill(audit_path, 1)
    result = run_audit("export", "--format", "csv", "--audit-db", str(audit_path))
    _assert_clean_failure(result, 2, "Invalid value for '--format'")


@pytest.mark.parametrize("command", ["init", "list", "verify", "export"])
def test_a_directory_given_as_the_log(tmp_path: Path, command: str) -> None:
    """`init` (and `safedb serve`) given a directory for the log ended in sqlite3's "unable to open database
    file" traceback (exit 1); the reading commands said the log was not found."""
    _assert_clean_failure(
        run_audit(command, "--audit-db", str(tmp_path)), 2, f"The audit log {tmp_path} is a directory"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["init", "list", "verify", "export"])
@pytest.mark.parametrize("given", ["option", "config"])
def test_a_url_python_cannot_split_is_one_line(tmp_path: Path, command: str, given: str) -> None:
    """`urlsplit` refuses a stray `[` (`Invalid IPv6 URL`): telling the URL from a file path ended in that
    ValueError's traceback, given as --audit-db or as the configuration file's server.audit_db."""
    url = "postgresql://[bad"
    config = tmp_path / "safedb.toml"
    config.write_text(f'[server]\naudit_db = "{url}"\n[targets.x]\ndatabase = "x.db"\n', encoding="utf-8")
    result = run_audit(command, *(["--audit-db", url] if given == "option" else ["--config", str(config)]))
    _assert_clean_failure(result, 2, "Error: Cannot connect to the PostgreSQL audit log at postgresql (unparsable")
    assert len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["safedb.toml"]


def test_an_export_that_fails_part_way_leaves_no_partial_file(audit_path: Path, tmp_path: Path) -> None:
    """`export -o` wrote into its output as it read: a record that could not be read part-way left the records
    before it in the file (exit 2), over what an earlier export had written there."""
    fill(audit_path, 5)
    with tampering(audit_path) as db:
        db.execute("UPDATE audit_log SET sql = CAST(sql AS BLOB) WHERE seq = 4")
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("an earlier export\n", encoding="utf-8")
    new = tmp_path / "new.jsonl"
    for output in (earlier, new):
        result = run_audit("export", "--audit-db", str(audit_path), "-o", str(output))
        _assert_clean_failure(result, 2, "Audit record 4 cannot be read")
    assert earlier.read_text(encoding="utf-8") == "an earlier export\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([audit_path.parent.name, earlier.name])


def test_an_export_file_is_complete_and_readable_by_its_owner_only(audit_path: Path, tmp_path: Path) -> None:
    records = fill(audit_path, 3)
    output = tmp_path / "export.jsonl"
    result = run_audit("export", "--audit-db", str(audit_path), "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["hash"] for line in output.read_text(encoding="utf-8").splitlines()] == [
        record.hash for record in records
    ]
    assert output.stat().st_mode & 0o777 == 0o600
    output.chmod(0o640)
    assert run_audit("export", "--audit-db", str(audit_path), "-o", str(output)).returncode == 0
    assert output.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([audit_path.parent.name, output.name])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["verify"], ["export"], ["init"]], ids="-".join)
def test_output_that_cannot_be_written_is_one_line_and_exit_2(audit_path: Path, args: list[str]) -> None:
    """Output to a full disk ended in an OSError traceback, with exit status 1, which for `verify` means tampering."""
    fill(audit_path, 3)
    with Path("/dev/full").open("w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "safedb", "audit", *args, "--audit-db", str(audit_path)],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == "Error: Cannot write the output: No space left on device\n"


@pytest.mark.parametrize(
    ("args", "tampered", "status"),
    [(["export"], False, 0), (["list"], False, 0), (["list", "--json"], False, 0), (["verify"], False, 0),
     (["verify"], True, 1)],
    ids=["export", "list", "list-json", "verify", "verify-tampered"],
)  # fmt: skip
def test_a_reader_going_away_ends_quietly_with_the_commands_own_status(
    audit_path: Path, args: list[str], tampered: bool, status: int
) -> None:
    """`safedb audit export | head` exited 1, which the audit commands keep for tampering. The reader here is gone
    before the first line; `verify`'s verdict stands all the same."""
    fill(audit_path, 50)
    if tampered:
        with tampering(audit_path) as db:
            db.execute("UPDATE audit_log SET sql = 'SELECT 1' WHERE seq = 7")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "safedb", "audit", *args, "--audit-db", str(audit_path)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (status, "")
