"""The `safedb` command's handling of bad input: one clear line and an exit code, never a traceback."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from safedb.launch import exposure_warning
from safedb.web.passwords import hash_password, verify_password
from tests.client.test_real_terminal import THIS_CHECKOUT, Tmux, require_tmux
from tests.helpers import safedb_serve

ALICE_HASH = hash_password("correct horse", iterations=1000)


def run_safedb(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safedb", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_missing_database_file(tmp_path: Path) -> None:
    result = run_safedb("serve", "--database", str(tmp_path / "nope.db"))
    assert result.returncode == 1
    assert "Database file not found" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.parametrize("url", ["mysql://db.example/shop", "sqlite:///var/data/app.db", "mariadb+pymysql://x/y"])
def test_a_url_of_another_database_is_refused_by_name(url: str) -> None:
    """Taken for a file path, it was reported as a missing file with its `//` collapsed (`mysql:/db.example/shop`)."""
    result = run_safedb("serve", "--database", url)
    assert result.returncode != 0
    scheme = url.split("://", maxsplit=1)[0]
    assert f"{scheme}://... is neither" in result.stderr
    assert "postgresql://" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--database", "Error: Cannot connect to PostgreSQL as postgresql (unparsable connection string): "),
        (
            "--audit-db",
            "Error: Cannot connect to the PostgreSQL audit log at postgresql (unparsable connection string): ",
        ),
    ],
)
def test_a_url_python_cannot_split_is_one_line(tmp_path: Path, demo_db: Path, option: str, message: str) -> None:
    """`urlsplit` refuses a stray `[` (`Invalid IPv6 URL`): naming the target, or telling the audit URL from a file
    path, ended in that ValueError's traceback. libpq now says what is wrong, as for a target in a file."""
    database = [] if option == "--database" else ["--database", str(demo_db)]
    url = "postgresql://app:s3cret-pw@[bad"
    result = run_safedb("serve", *database, option, url, "--port", "0", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(message)
    assert 'matching "]" in IPv6 host address' in line
    assert "s3cret-pw" not in line  # libpq repeats a string it cannot parse, password and all


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ('public_url = "http://[bad"', "Error: server.public_url: 'http://[bad' is not a valid URL: Invalid IPv6 URL"),
        (
            "approvers = [{ name = 'bob', password_hash = 'pbkdf2_sha256$1$abcd$a' }]",
            "Error: server.approvers: the password_hash of 'bob' is not one `safedb approver-hash` made",
        ),
    ],
    ids=["public-url", "password-hash"],
)
def test_a_bad_approval_page_setting_stops_the_start_in_one_line(tmp_path: Path, server: str, message: str) -> None:
    """`http://[bad` ended the start in a ValueError traceback; a malformed digest was taken, and then every sign-in
    as that approver was an HTTP 500."""
    approvers = "" if "approvers" in server else f"approvers = [{{ name = 'alice', password_hash = '{ALICE_HASH}' }}]"
    config = tmp_path / "safedb.toml"
    config.write_text(f"[server]\n{server}\n{approvers}\n[targets.prod.policy]\nchannel = 'web'\n")
    result = run_safedb("serve", "--config", str(config), "--port", "0", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr == message + "\n"


@pytest.mark.parametrize("option", ["--database", "--data-dir", "--audit-db"])
def test_an_empty_option_is_refused(tmp_path: Path, option: str) -> None:
    """Each took it as something of its own: `--data-dir ''` the current directory (the demo database and the audit
    log made there), `--database ''` the demo database, `--audit-db ''` the default log."""
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", option, "", "--port", "0"],
        capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"Invalid value for '{option}" in result.stderr
    assert "must not be empty" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_file_that_is_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("these are not the pages you are looking for\n" * 100)
    result = run_safedb("serve", "--database", str(bogus))
    assert result.returncode == 1
    assert "not a database" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_data_directory_that_cannot_be_made(tmp_path: Path, demo_db: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    demo = run_safedb("serve", "--data-dir", str(blocker / "data"))
    audit = run_safedb("serve", "--database", str(demo_db), "--audit-db", str(blocker / "audit.db"))
    assert demo.returncode == audit.returncode == 1
    assert f"Cannot create the demo database in {blocker / 'data'}: Not a directory" in demo.stderr
    assert f"Cannot create the audit log {blocker / 'audit.db'}: " in audit.stderr
    assert "Traceback" not in demo.stderr + audit.stderr
    assert blocker.read_text() == "not a directory\n"


def test_port_already_in_use(demo_db: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run_safedb("serve", "--database", str(demo_db), "--port", str(port))
    assert result.returncode == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "give another --port" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_ipv6_address_is_announced_in_brackets(demo_db: Path) -> None:
    """`http://::1:8000/mcp` is no URL: pasted into a client, its port could not be read."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    with safedb_serve(demo_db, "--host", "::1") as server:
        assert server.url.startswith("http://[::1]:")
        assert server.port > 0


def test_sigterm_closes_the_databases_and_the_audit_log(demo_db: Path) -> None:
    """SIGTERM (a service manager stopping the server) ended it with status 143 before it closed its databases and
    its audit log. SQLite removes a log's write-ahead file when its last connection closes."""
    wal = demo_db.parent / "audit.db-wal"
    with safedb_serve(demo_db) as server:
        assert wal.exists()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0
    assert not wal.exists()
    assert "Traceback" not in "".join(server.log)


def test_sigterm_ends_a_stdio_server_too(demo_db: Path) -> None:
    """Over stdio its client still holds standard input open."""
    wal = demo_db.parent / "audit.db-wal"
    command = [sys.executable, "-m", "safedb", "serve", "--database", str(demo_db), "--transport", "stdio"]
    env = {**os.environ, "SAFEDB_AUDIT_DB": str(demo_db.parent / "audit.db")}
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as server:
        assert server.stderr is not None
        while "over stdio" not in (line := server.stderr.readline()):
            assert line, "the server ended before serving"
        server.send_signal(signal.SIGTERM)
        try:
            assert server.wait(timeout=30) == 0
        finally:
            server.kill()
        assert "Traceback" not in server.stderr.read()
    assert not wal.exists()


def test_ctrl_c_stops_a_stdio_server_in_a_terminal(tmp_path: Path, demo_db: Path) -> None:
    """Over stdio in a terminal, Ctrl-C closed the server's databases and audit log, and then it went on waiting for a
    line of input."""
    require_tmux()
    audit = tmp_path / "audit.db"
    serve = [sys.executable, "-m", "safedb", "serve", "--database", str(demo_db), "--transport", "stdio"]
    # The shell outlives the Ctrl-C (its trap is reset to the default in the server) to report how the server ended.
    serving = shlex.join(["env", THIS_CHECKOUT, f"SAFEDB_AUDIT_DB={audit}", *serve])
    terminal = Tmux(["sh", "-c", f"trap : INT; {serving}; echo ended with $?; sleep 60"])
    try:
        terminal.wait_for("over stdio")
        terminal.type(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        terminal.wait_for('"result":{}')  # serving: reading the next line of input
        terminal.press("C-c")
        terminal.wait_for("ended with 0", timeout=15)
        assert "Traceback" not in terminal.screen()
    finally:
        terminal.close()
    assert not Path(f"{audit}-wal").exists()


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"]])
def test_help(args: list[str]) -> None:
    result = run_safedb(*args)
    assert result.returncode == 0
    assert "Usage: safedb" in result.stdout


@pytest.mark.parametrize("option", ["--approval-timeout", "--statement-timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "1e999", "abc"])
def test_a_time_limit_must_be_a_finite_number_of_seconds(demo_db: Path, option: str, value: str) -> None:
    """`inf` and `nan` parse as floats and `nan` passes any range: a server started with `--statement-timeout nan`
    served with no time limit, and one with `--approval-timeout inf` died at start with a traceback."""
    result = run_safedb("serve", "--database", str(demo_db), "--port", "0", option, value)
    assert result.returncode == 2
    assert f"Invalid value for '{option}': '{value}' is not a number of seconds." in result.stderr
    assert "Traceback" not in result.stderr


def test_short_request_state_key(demo_db: Path) -> None:
    result = run_safedb("serve", "--database", str(demo_db), "--request-state-key", "too-short")
    assert result.returncode == 2
    assert "at least 32 bytes" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_names_each_variable_and_errors_name_the_option(demo_db: Path) -> None:
    """Not every variable's name follows from its option's (`--allow-path` is SAFEDB_ALLOWED_PATHS)."""
    help_text = " ".join(run_safedb("serve", "--help").stdout.split())
    assert "SAFEDB_ALLOWED_PATHS" in help_text
    assert "SAFEDB_REQUEST_STATE_KEYS" in help_text
    result = run_safedb("serve", "--database", str(demo_db), "--port", "x")
    assert "Invalid value for '--port': 'x'" in result.stderr


def test_the_audit_log_is_not_served_as_a_database(tmp_path: Path, demo_db: Path) -> None:
    """Served, an agent could read every statement and justification logged."""
    audit = tmp_path / "audit.db"
    result = run_safedb("serve", "--database", str(demo_db), "--audit-db", str(audit), "--transport", "stdio")
    assert result.returncode == 0  # the log made, then the server ended with its empty standard input
    result = run_safedb("serve", "--database", str(audit), "--audit-db", str(audit), "--transport", "stdio")
    assert result.returncode == 1
    assert "is the audit log: SafeDB does not serve its own audit log" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_database_in_a_config_file_is_named(tmp_path: Path) -> None:
    """It was read as the config file's directory: `Not a file: /the/config/dir`."""
    config = tmp_path / "safedb.toml"
    config.write_text('[targets.x]\ndatabase = ""\n', encoding="utf-8")
    result = run_safedb("serve", "--config", str(config))
    assert result.returncode == 1
    assert "targets.x.database: String should have at least 1 character" in result.stderr


def test_an_invalid_value_from_a_variable_names_the_variable(demo_db: Path) -> None:
    """A value set in the environment, where the command line shows nothing, was reported under the option alone."""
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", "--database", str(demo_db)],
        env={**os.environ, "SAFEDB_PORT": "x"}, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Invalid value for '--port' (from SAFEDB_PORT): 'x'" in result.stderr


def test_an_allowed_path_that_is_not_a_directory_is_announced(tmp_path: Path, demo_db: Path) -> None:
    """It was taken silently: a mistyped directory showed only when a statement using it was refused."""
    (tmp_path / "backups").mkdir()
    args = ["--allow-path", str(tmp_path / "backups"), "--allow-path", str(tmp_path / "bakups")]
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", "--database", str(demo_db), "--transport", "stdio",
         "--audit-db", str(tmp_path / "audit.db"), *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    name = demo_db.stem
    assert f"warning: {tmp_path / 'bakups'}, allowed for ATTACH and VACUUM INTO on {name}, is not a directory" in (
        result.stderr
    )
    assert "backups," not in result.stderr


def test_a_directory_given_as_the_audit_log(tmp_path: Path, demo_db: Path) -> None:
    """sqlite3's "unable to open database file" went up as a traceback."""
    result = run_safedb("serve", "--database", str(demo_db), "--audit-db", str(tmp_path), "--port", "0")
    assert result.returncode == 1
    suggestion = tmp_path / "audit.db"
    assert result.stderr == (
        f"Error: The audit log {tmp_path} is a directory: give the path of a file in it (such as {suggestion}).\n"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["serve", "--help"], ["approver-hash", "--password", "x"]],
    ids=["help", "version", "serve-help", "approver-hash"],
)  # fmt: skip
def test_output_that_cannot_be_written_is_one_line(args: list[str]) -> None:
    """A full disk under stdout ended in an OSError traceback."""
    with Path("/dev/full").open("w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "safedb", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=30,
            check=False,
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == "Error: Cannot write the output: No space left on device\n"


def test_approver_hash_reads_one_line_from_standard_input() -> None:
    """Without a terminal, approver-hash printed Python's GetPassWarning, asked twice on a pipe and ended in
    'Aborted!' (exit 1): there was no way to hash a password without putting it on the command line."""
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "approver-hash"], input="correct horse\n", capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert verify_password(result.stdout.strip(), "correct horse")
    assert not verify_password(result.stdout.strip(), "correct horse\n")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ([], b"", "No password on standard input"),
        ([], b"\n", "No password on standard input"),
        ([], b"\xff\n", "The password on standard input is not UTF-8 text."),
        (["--password", ""], b"", "Invalid value for --password: the password is empty."),
    ],
    ids=["no-input", "empty-line", "not-utf8", "empty-option"],
)
def test_approver_hash_refuses_no_password(args: list[str], stdin: bytes, message: str) -> None:
    """An empty password was hashed (and could then sign an approver in); a GetPassWarning and 'Aborted!' came
    when standard input was not a terminal."""
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "approver-hash", *args], input=stdin, capture_output=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == b""
    assert message in result.stderr.decode()
    assert b"Traceback" not in result.stderr
    assert b"Warning" not in result.stderr


def test_approver_hash_refuses_a_password_argument_that_is_not_utf8() -> None:
    """A non-UTF-8 byte on the command line (a surrogate to Python) ended in a UnicodeEncodeError traceback."""
    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"safedb", b"approver-hash", b"--password", b"\xff"], capture_output=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert b"Invalid value for --password: the password is not UTF-8 text." in result.stderr
    assert b"Traceback" not in result.stderr


def _with_stdin_closed(*args: str) -> subprocess.CompletedProcess[str]:
    """`safedb ARGS <&-`: the process starts without a standard input at all (not an empty one)."""
    command = " ".join(shlex.quote(arg) for arg in [sys.executable, "-m", "safedb", *args])
    return subprocess.run(
        ["/bin/sh", "-c", f"exec {command} <&-"], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("command", ["serve", "client"])
def test_a_closed_standard_input_reads_as_empty(demo_db: Path, command: str) -> None:
    """Python makes a closed standard input None: 'serve --transport stdio' ended in "'NoneType' object has no
    attribute 'buffer'" and the client in "... no attribute 'isatty'", both tracebacks."""
    serve = ["serve", "--transport", "stdio", "--database", str(demo_db)]
    args = serve if command == "serve" else ["client", "--stdio", shlex.join([sys.executable, "-m", "safedb", *serve])]
    result = _with_stdin_closed(*args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "serving sqlite" in result.stderr


@pytest.mark.parametrize(
    ("host", "warned"),
    [("127.0.0.1", False), ("127.0.0.2", False), ("localhost", False), ("::1", False), ("[::1]", False),
     ("0.0.0.0", True), ("::", True), ("192.168.1.20", True), ("db.example.com", True)],
)  # fmt: skip
def test_listening_beyond_this_machine_is_warned_about(host: str, warned: bool) -> None:
    """The MCP endpoint asks for no credentials, and a client answers its own form questions: `--host 0.0.0.0` started
    without a word. (Checked without listening there: tests listen on loopback only.)"""
    warning = exposure_warning(host)
    assert (warning is not None) == warned
    if warning is not None:
        assert warning.startswith(f"warning: listening on {host}, beyond this machine.")
        assert 'channel = "web"' in warning
