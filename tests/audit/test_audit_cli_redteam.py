"""Red team of `safedb audit list`: what a client writes into the log (its name, the SQL text) is printed to the
auditor's terminal, and must not forge rows or hide text there."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp_types import Implementation

from safedb.audit.chain import chain_hash
from tests.audit.helpers import TRIGGERS, fill, run_audit, tampering
from tests.helpers import Responder, in_process_server, rows

pytestmark = pytest.mark.anyio

FORGED_ROW = "99   2026-01-01T00:00:00.000000Z  executed   test    nobody  0     SELECT 1"
CLIENT_NAME = f"agent\n{FORGED_ROW}"
# On a terminal: ESC [2K erases the line; backspaces move back over the characters before, for the next to overwrite.
QUERY = "DELETE FROM invoices WHERE id > 0 -- \x1b[2K" + "\b" * 12


def list_on_a_terminal(audit: Path) -> str:
    """`safedb audit list` as an auditor runs it, its output on a real pseudo-terminal."""
    leader, follower = os.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "safedb", "audit", "list", "--audit-db", str(audit)],
            stdout=follower, stderr=subprocess.PIPE, timeout=60, check=False,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        assert process.returncode == 0, process.stderr
        output = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: all was read
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return output.decode().replace("\r\n", "\n")


async def test_a_client_cannot_forge_or_hide_rows_of_the_listing(demo_db: Path) -> None:
    declined = Responder(action="decline")
    name = Implementation(name=CLIENT_NAME, version="1.0")
    async with (
        in_process_server(demo_db) as (server, _),
        Client(server, mode="legacy", elicitation_callback=declined, client_info=name) as client,
    ):
        result = await client.call_tool("execute_query", {"query": QUERY})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]
    listing = list_on_a_terminal(demo_db.parent / "audit.db")
    lines = listing.splitlines()
    assert len(lines) == 3, listing  # the header, `requested` and `declined`: no forged row
    assert [line.split()[2] for line in lines[1:]] == ["requested", "declined"]
    assert not any(character in listing for character in "\x1b\b"), repr(listing)
    for line in lines[1:]:
        assert "agent⟨U+000A⟩99" in line
        assert line.endswith("DELETE FROM invoices WHERE id > 0 -- ⟨U+001B⟩[2K⟨U+0008, 12 times⟩")


# What JSON leaves as it is but a terminal acts on or draws out of order: DEL, an 8-bit CSI (a control sequence),
# a right-to-left override and isolate, a line separator; and one beyond the BMP (a tag character).
TERMINAL_CONTROLS = "\x7f\u009b\u202e\u2066\u2028\U000e0001"


async def test_json_listing_and_export_escape_what_a_terminal_would_act_on(demo_db: Path) -> None:
    """`list --json` and `export` wrote DEL, C1 controls, bidi controls and line separators from the client's
    name and SQL raw to the auditor's terminal (json.dumps escapes only the C0 controls)."""
    name = Implementation(name=f"agent{TERMINAL_CONTROLS}", version="1.0")
    query = f"DELETE FROM invoices WHERE id > 0 -- {TERMINAL_CONTROLS}"
    async with (
        in_process_server(demo_db) as (server, _),
        Client(server, mode="legacy", elicitation_callback=Responder(action="decline"), client_info=name) as client,
    ):
        await client.call_tool("execute_query", {"query": query})
    audit = str(demo_db.parent / "audit.db")
    listed = run_audit("list", "--json", "--audit-db", audit)
    exported = run_audit("export", "--audit-db", audit)
    for result in (listed, exported):
        assert result.returncode == 0, result.stderr
        assert not set(TERMINAL_CONTROLS) & set(result.stdout), repr(result.stdout)
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert json.loads(listed.stdout) == records
    assert [(record["decision"], record["sql"], record["caller"]) for record in records] == [
        ("requested", query, f"{name.name} 1.0"),
        ("declined", query, f"{name.name} 1.0"),
    ]  # the same text, escaped
    for record in records:
        assert chain_hash({key: value for key, value in record.items() if key != "hash"}) == record["hash"]


@pytest.mark.parametrize("moment", ["9999-12-31T23:00-02:00", "0001-01-01T00:30+01:00"])
@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize("command", ["list", "export"])
def test_a_time_whose_zone_leaves_the_calendar_is_a_clean_error(
    audit_path: Path, command: str, option: str, moment: str
) -> None:
    """In UTC these fall past year 9999 or before year 1: datetime raised OverflowError, a traceback and exit 1."""
    fill(audit_path, 2)
    result = run_audit(command, "--audit-db", str(audit_path), option, moment)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "out of range" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("column", ["sql", "time", "caller", "justification", "prev_hash"])
def test_a_record_edited_to_hold_a_blob_is_named_as_edited(audit_path: Path, column: str) -> None:
    """SQLite lets a text column hold a BLOB. verify hashed it as JSON and ended in a TypeError traceback (exit 1
    without a finding), where it names every other edit."""
    fill(audit_path, 5)
    with tampering(audit_path) as db:
        db.execute(f"UPDATE audit_log SET {column} = CAST({column} AS BLOB) WHERE seq = 3")
    result = run_audit("verify", "--audit-db", str(audit_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("Audit log NOT intact: record 3 was edited"), result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-link"])
def test_export_never_writes_over_the_log_itself(audit_path: Path, suffix: str) -> None:
    """`export -o` opened its output for writing before anything else: given the log's own file (a slip of the
    keyboard, or a link to it), it emptied the log and then failed with "not a SafeDB audit log" (exit 2)."""
    records = fill(audit_path, 3)
    output = audit_path.with_name(audit_path.name + suffix)
    if suffix == "-link":
        output.symlink_to(audit_path.name)
    elif not output.exists():
        output.touch()
    result = run_audit("export", "--audit-db", str(audit_path), "-o", str(output))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is the audit log" in result.stderr
    assert "Traceback" not in result.stderr
    verified = run_audit("verify", "--audit-db", str(audit_path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout == f"Audit log intact: 3 records; last record 3, hash {records[-1].hash}.\n"


NOT_UTF8 = os.fsdecode(b"req\xff")
"""An argument a shell passes as bytes that are not UTF-8; Python holds the \\xff as the lone surrogate U+DCFF."""


@pytest.mark.parametrize("option", ["--request", "--target"])
@pytest.mark.parametrize("command", ["list", "export"])
def test_a_filter_that_is_not_utf8_is_an_invalid_option(audit_path: Path, command: str, option: str) -> None:
    """The argument went to sqlite3 as a parameter, which cannot encode it: a UnicodeEncodeError traceback, exit 1."""
    fill(audit_path, 2)
    result = run_audit(command, "--audit-db", str(audit_path), option, NOT_UTF8)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Error: Invalid value for '{option}': 'req\\udcff' is not UTF-8 text" in result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_limit_past_what_sqlite_counts_is_an_invalid_option(audit_path: Path) -> None:
    """An OverflowError traceback from sqlite3, exit 1."""
    fill(audit_path, 2)
    result = run_audit("list", "--audit-db", str(audit_path), "--limit", str(2**70))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Invalid value for '--limit'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["verify", "list", "export"])
def test_a_log_this_user_cannot_open_is_not_reported_as_tampered(tmp_path: Path, command: str) -> None:
    """A log readable by the server's own user only, as docs/audit.md advises: an auditor running as another user
    got sqlite3's traceback and exit 1, which `verify` keeps for tampering."""
    if os.geteuid() != 0:
        unreadable = tmp_path / "audit.db"
        fill(unreadable, 2)
        unreadable.chmod(0)
    else:  # root reads any file but this one, which the kernel lets nobody read
        unreadable = Path("/proc/sys/vm/drop_caches")
        if not unreadable.is_file() or os.access(unreadable, os.R_OK):
            pytest.skip("no file this user cannot read")
    result = run_audit(command, "--audit-db", str(unreadable))
    assert result.returncode == 2, result.stdout + result.stderr
    expected = f"Error: Cannot open the audit log {unreadable}: unable to open database file"
    assert result.stderr.splitlines() == [expected]


@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_postgres_url_that_is_not_utf8_is_an_invalid_option(tmp_path: Path, given: str) -> None:
    """libpq takes a URL as UTF-8 bytes: psycopg's encoding of it ended in a UnicodeEncodeError traceback."""
    url = f"postgresql://{NOT_UTF8}@127.0.0.1:1/app"
    arguments, env = (["--audit-db", url], None) if given == "option" else ([], {"SAFEDB_AUDIT_DB": url})
    result = run_audit("verify", *arguments, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    hint = "'--audit-db'" if given == "option" else "'--audit-db' (from SAFEDB_AUDIT_DB)"
    assert f"Error: Invalid value for {hint}: the postgresql:// URL is not UTF-8 text" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_log_file_whose_path_is_not_utf8_is_found(audit_path: Path, tmp_path: Path) -> None:
    """A file path is bytes to the file system: only a URL must be UTF-8."""
    records = fill(audit_path, 2)
    log = audit_path.rename(tmp_path / NOT_UTF8)
    result = run_audit("verify", "--audit-db", str(log))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"Audit log intact: 2 records; last record 2, hash {records[-1].hash}.\n"


def _rebuilt_without_constraints(path: Path) -> sqlite3.Connection:
    """The log's table rebuilt with the same columns but no INTEGER PRIMARY KEY, so that `seq` takes any value."""
    db = sqlite3.connect(path, isolation_level=None)
    for trigger in TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.execute("ALTER TABLE audit_log RENAME TO old_log")
    db.execute("CREATE TABLE audit_log AS SELECT * FROM old_log")
    db.execute("DROP TABLE old_log")
    return db


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        # NULL sorts before every number; text after them, past the record the head anchor names.
        ("NULL", "a record was inserted before record 1: its sequence number is NULL, not a whole number."),
        (
            "'abc'",
            "a record was inserted after record 3, where the head anchor says the log ends: its sequence number is "
            "'abc', not a whole number.",
        ),
    ],
)
def test_a_record_with_no_whole_sequence_number_is_named(audit_path: Path, seq: str, expected: str) -> None:
    """`int(seq)` of the row ended verify in a TypeError or ValueError traceback (exit 1 only by accident)."""
    fill(audit_path, 3)
    db = _rebuilt_without_constraints(audit_path)
    try:
        db.execute(
            f"INSERT INTO audit_log SELECT {seq}, time, 'accepted', request_id, target, caller, sql, classification, "
            "changes, justification, environment, rows_affected, error, hash, 'x' FROM audit_log WHERE seq = 3"
        )
    finally:
        db.close()
    result = run_audit("verify", "--audit-db", str(audit_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == f"Audit log NOT intact: {expected}\n"
    assert result.stderr == ""


def test_changes_nested_deeper_than_json_reads_are_an_edit(audit_path: Path) -> None:
    """Reading the JSON of `changes`, or writing it again to hash it, ended in a RecursionError traceback."""
    fill(audit_path, 4)
    with tampering(audit_path) as db:
        db.execute("UPDATE audit_log SET changes = ? WHERE seq = 3", ("[" * 100_000 + "]" * 100_000,))
    result = run_audit("verify", "--audit-db", str(audit_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == "Audit log NOT intact: record 3 was edited: its contents do not match its hash.\n"
    assert "Traceback" not in result.stderr
