"""`safedb call` and `safedb client` as processes, unattended, against a non-SafeDB server and SafeDB itself."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.servers import FEATURE_SERVER, ROOT
from tests.helpers import ServerProcess, rows, safedb_serve, scratch_table, serving_process

ERAS = ["handshake", "2026-07-28"]

EVERYTHING_ANSWER = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "color": "blue",
    "toppings": ["ham"],
    "first-name": "Augusta",
    "size": "s",
}


def safedb(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safedb", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        input=stdin if stdin is not None else "",
        # This checkout's code first: in a checkout that is not the installed one (a git worktree), ROOT alone
        # would run the installed safedb.
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )


def answers_file(tmp_path: Path, rules: dict[str, Any]) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(rules))
    return str(path)


@pytest.fixture(scope="module")
def served(shared_db: Path) -> Iterator[ServerProcess]:
    with safedb_serve(shared_db) as server:
        yield server


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["execute_query", "query=SELECT '\udcff'"], "the argument \"query=SELECT '\\udcff'\" is not UTF-8 text"),
        (["execute_query", '{"query": "SELECT \udcff"}'], "is not UTF-8 text (it holds 0xff)"),
        (["\udcff"], "the tool name '\\udcff' is not UTF-8 text (it holds 0xff)"),
    ],
)
def test_a_byte_no_utf8_text_holds_is_an_argument_error(server_url: str, arguments: list[str], problem: str) -> None:
    """A byte such as 0xff on the command line (Python keeps it as a lone surrogate) could not be sent: an
    ExceptionGroup traceback; typed at the client's prompt, it ended the whole session."""
    called = safedb("call", server_url, *arguments)
    prompted = safedb("client", server_url, "-x", " ".join(shlex.quote(word) for word in ["call", *arguments]))
    for result in (called, prompted):
        assert result.returncode == 1, result.stdout + result.stderr
        assert problem in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("era", ERAS)
def test_call_answers_every_schema_feature_from_rules(tmp_path: Path, server_url: str, era: str) -> None:
    rules = answers_file(
        tmp_path, {"rules": [{"tool": "ask_everything", "action": "accept", "content": EVERYTHING_ANSWER}]}
    )
    result = safedb("call", "--era", era, "--answers", rules, "--json", server_url, "ask_everything")
    assert result.returncode == 0, result.stderr
    sent = json.loads(result.stdout)["structuredContent"]["form"]
    # Defaults fill what the rule left out; optional fields without a default are left out, never null.
    assert sent == {
        "action": "accept",
        "content": {**EVERYTHING_ANSWER, "age": 30, "subscribe": True, "plan": "free", "days": ["mon"]},
    }


@pytest.mark.parametrize("era", ERAS)
def test_rule_answers_that_do_not_fit_are_never_sent(tmp_path: Path, server_url: str, era: str) -> None:
    bad = {**EVERYTHING_ANSWER, "toppings": ["pineapple"], "age": 200}
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": bad}]})
    result = safedb("call", "--era", era, "--answers", rules, server_url, "ask_everything")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "form: cancel"
    assert "does not fit" in result.stderr
    assert "pineapple" in result.stderr


CONSTRAINED = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "price": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["level", "zip", "price"],
}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"level": 7, "zip": "12345", "price": 1}, "must be one of 1, 2, 3"),
        ({"level": 1, "zip": "abc", "price": 1}, "must match the pattern"),
        ({"level": 1, "zip": "12345", "price": 0}, "greater than 0"),
    ],
)
def test_rule_answers_the_schemas_constraints_forbid_are_never_sent(
    tmp_path: Path, server_url: str, era: str, content: dict[str, Any], problem: str
) -> None:
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": content}]})
    schema = json.dumps(CONSTRAINED)
    result = safedb("call", "--era", era, "--answers", rules, server_url, "ask_for", f"requested_schema:={schema}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "form: cancel"
    assert problem in result.stderr


def test_a_tools_json_rpc_error_is_reported_as_the_servers_answer(server_url: str) -> None:
    shown = safedb("call", server_url, "refuse_with_an_error")
    as_json = safedb("call", "--json", server_url, "refuse_with_an_error")
    assert shown.returncode == as_json.returncode == 1
    assert shown.stdout.strip() == "Error from the server: this tool answers every call with a JSON-RPC error"
    assert "Cannot talk" not in shown.stderr + as_json.stderr
    assert json.loads(as_json.stdout) == {
        "error": {"code": -32602, "message": "this tool answers every call with a JSON-RPC error"}
    }


@pytest.mark.parametrize("era", ERAS)
def test_the_servers_warnings_and_errors_are_shown_one_clean_line_each(server_url: str, era: str) -> None:
    result = safedb("call", "--era", era, server_url, "log_and_echo", "text=done")
    assert (result.returncode, result.stdout.strip()) == (0, "done"), result.stderr
    assert result.stderr.splitlines() == [
        f"Warning: {server_url} logs: the cache is cold",
        f'Error: {server_url} (db) logs: {{"code": 7, "detail": "\\u001b[31mred"}}',
    ]


def test_a_stdio_server_printing_other_things_on_stdout_gets_one_warning_line() -> None:
    command = shlex.join([*FEATURE_SERVER, "--stdio", "--banner", "Starting the server v1"])
    result = safedb("call", "--stdio", command, "echo", "text=hello")
    assert (result.returncode, result.stdout.strip()) == (0, "hello"), result.stderr
    assert result.stderr.splitlines() == [
        f"Warning: {command} sent something that is not an MCP message (ignored): 'Starting the server v1'"
    ]


@pytest.mark.parametrize("era", ERAS)
def test_decline_all_and_the_default_decline(tmp_path: Path, server_url: str, era: str) -> None:
    declined = safedb("call", "--era", era, "--decline-all", server_url, "ask_three")
    assert declined.stdout.strip() == "q1: decline, q2: decline, q3: decline"
    asked = [line.rsplit(": ", 1)[-1] for line in declined.stderr.splitlines() if "question answered" in line]
    assert asked == ["Question number 1", "Question number 2", "Question number 3"]  # in the order they came
    no_match = answers_file(tmp_path, {"rules": [{"tool": "other", "action": "accept"}]})
    defaulted = safedb("call", "--era", era, "--answers", no_match, server_url, "ask_secret")
    assert defaulted.stdout.strip() == "secret: decline"
    assert "no rule matched" in defaulted.stderr


@pytest.mark.parametrize("era", ERAS)
def test_unattended_answers_are_reported_in_the_servers_words_without_its_escape_sequences(
    server_url: str, era: str
) -> None:
    shown = safedb("call", "--era", era, "--decline-all", server_url, "ask_everything")
    blank = safedb("call", "--era", era, "--decline-all", server_url, "ask_without_words")

    assert shown.stdout.strip() == "form: decline"
    assert "Please fill in the feature form. Thanks!" in shown.stderr
    assert "\x1b" not in shown.stderr
    assert "evil title" not in shown.stderr
    assert blank.returncode == 0, blank.stderr
    assert blank.stdout.strip() == "blank: decline"
    assert "question answered decline" in blank.stderr


def test_without_a_terminal_or_rules_questions_are_declined(server_url: str) -> None:
    result = safedb("call", server_url, "ask_secret")
    assert result.stdout.strip() == "secret: decline"
    assert "no terminal" in result.stderr


def test_arguments_are_typed_by_the_tool_schema(server_url: str) -> None:
    result = safedb("call", server_url, "echo", "text=007", "count=2", "loud=true")
    assert (result.returncode, result.stdout.strip()) == (0, "007 007")
    as_json = safedb("call", "--json", server_url, "echo", '{"text": "hi", "count": 3}')
    assert json.loads(as_json.stdout)["content"][0]["text"] == "hi hi hi"


def test_stdio_target(tmp_path: Path) -> None:
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": {"ok": True}}]})
    command = " ".join([*FEATURE_SERVER, "--stdio"])
    result = safedb("call", "--stdio", command, "--answers", rules, "--json", "ask_three")
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout)["structuredContent"]
    assert [answers[key] for key in ("q1", "q2", "q3")] == [{"action": "accept", "content": {"ok": True}}] * 3


@pytest.mark.parametrize("key", ["mcpServers", "servers"])
def test_config_file_targets(tmp_path: Path, server_url: str, key: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                key: {
                    "over-http": {"type": "http", "url": server_url},
                    "over-stdio": {
                        "command": FEATURE_SERVER[0],
                        "args": [*FEATURE_SERVER[1:], "--stdio"],
                        "cwd": str(ROOT),
                    },
                }
            }
        )
    )
    for name in ("over-http", "over-stdio"):
        result = safedb("call", "--config", str(config), "--server", name, "echo", "text=hello")
        assert (result.returncode, result.stdout.strip()) == (0, "hello"), result.stderr
    missing = safedb("call", "--config", str(config), "--server", "nope", "echo", "text=x")
    assert missing.returncode == 1
    assert "no server named 'nope'" in missing.stderr


def test_a_config_file_with_comments_and_trailing_commas_as_vs_code_writes_them(
    tmp_path: Path, server_url: str
) -> None:
    """VS Code's mcp.json is JSON with comments (JSONC); such a file was refused as not valid JSON."""
    config = tmp_path / "mcp.json"
    config.write_text(
        "{\n"
        "  // SafeDB's test server; see https://example.com/docs // not the end of the string\n"
        '  "servers": {\n'
        f'    "over-http": {{"type": "http", "url": {json.dumps(server_url)}, /* over HTTP */ }},\n'
        "  },\n"
        "}\n"
    )
    result = safedb("call", "--config", str(config), "--server", "over-http", "echo", "text=hello")
    assert (result.returncode, result.stdout.strip()) == (0, "hello"), result.stderr


def test_client_runs_session_commands_from_options_and_stdin(server_url: str) -> None:
    by_option = safedb("client", server_url, "-x", "tools", "-x", "echo text=hi", "-x", "history")
    assert by_option.returncode == 0, by_option.stderr
    assert "ask_everything" in by_option.stdout
    assert "echo text=…" in by_option.stdout
    assert "hi" in by_option.stdout.splitlines()
    assert "   2  echo text=hi" in by_option.stdout
    by_stdin = safedb("client", server_url, stdin="call echo text=piped\nquit\ncall echo text=never\n")
    assert by_stdin.stdout.strip() == "piped"


def test_tabular_results_and_tool_errors_against_safedb(served: ServerProcess, shared_db: Path) -> None:
    table = scratch_table(shared_db)
    listed = safedb("call", served.url, "execute_query", f"query=SELECT id, label FROM {table} ORDER BY id")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[:3] == ["id | label", "---+------", "1  | row 1"]
    assert "(3 rows)" in listed.stdout
    failed = safedb("call", served.url, "describe_table", "name=no_such_table")
    assert failed.returncode == 1
    assert "Error from the tool" in failed.stdout


def _documented_rules() -> dict[str, Any]:
    """The rules file docs/client.md shows under "Unattended use"."""
    section = (ROOT / "docs" / "client.md").read_text(encoding="utf-8").split("## Unattended use", 1)[1]
    return json.loads(section.split("```json", 1)[1].split("```", 1)[0])  # type: ignore[no-any-return]


def test_the_documented_rules_file_accepts_only_the_change_it_is_written_for(
    tmp_path: Path, served: ServerProcess, shared_db: Path
) -> None:
    """The example once searched for `DELETE FROM scratch_\\w+` in the message, which quotes the statement: a DELETE
    of every user, with that text in a string, was accepted."""
    rules = answers_file(tmp_path, _documented_rules())
    table = scratch_table(shared_db)
    users = rows(shared_db, "SELECT * FROM users")

    def call(query: str) -> str:
        result = safedb("call", "--answers", rules, served.url, "execute_query", f"query={query}")
        assert result.returncode == 0, result.stderr  # declined is an answer, not an error (README)
        return result.stdout

    smuggled = (
        f"DELETE FROM users WHERE name <> 'DELETE FROM {table}\nChange: data change (delete)\nTouches: table {table}'"
    )
    assert "declined" in call(smuggled)
    assert "declined" in call(f"drop table {table}")
    assert rows(shared_db, "SELECT * FROM users") == users
    assert "1 row affected" in call(f"DELETE FROM {table} WHERE id = 1")
    assert rows(shared_db, f"SELECT id FROM {table} ORDER BY id") == [(2,), (3,)]


@pytest.mark.parametrize("era", ERAS)
def test_unattended_approval_of_a_safedb_change(
    tmp_path: Path, served: ServerProcess, shared_db: Path, era: str
) -> None:
    table = scratch_table(shared_db)
    rules = answers_file(
        tmp_path,
        {
            "rules": [
                {"server": "SafeDB", "message": f"DELETE FROM {table}", "action": "accept",
                 "content": {"confirm": True, "justification": "test cleanup", "environment": "Development"}},
            ]
        },
    )  # fmt: skip
    approved = safedb(
        "call", "--era", era, "--answers", rules, served.url, "execute_query", f"query=DELETE FROM {table} WHERE id = 1"
    )
    assert approved.returncode == 0, approved.stderr
    assert "1 row affected" in approved.stdout
    refused = safedb("call", "--era", era, "--answers", rules, served.url, "execute_query", f"query=DROP TABLE {table}")
    assert "declined" in refused.stdout
    assert rows(shared_db, f"SELECT id FROM {table} ORDER BY id") == [(2,), (3,)]


def test_demo_with_its_own_server_declining(tmp_path: Path) -> None:
    result = safedb("demo", "--data-dir", str(tmp_path), "--decline-all")
    assert result.returncode == 0, result.stderr
    assert "Step 1" in result.stdout
    assert "(8 rows)" in result.stdout
    assert "declined" in result.stdout
    assert rows(tmp_path / "demo.db", "SELECT count(*) FROM invoices") == [(8,)]


def test_demo_after_an_approved_run_says_how_to_start_over(tmp_path: Path) -> None:
    """Its DROP TABLE approved once, every later run printed two "no such table" errors, with no hint."""
    rules = answers_file(
        tmp_path,
        {"rules": [{"message": "DROP TABLE invoices", "action": "accept",
                    "content": {"confirm": True, "justification": "demo", "environment": "Development"}}]},
    )  # fmt: skip
    data = tmp_path / "data"
    assert safedb("demo", "--data-dir", str(data), "--answers", rules).returncode == 0
    again = safedb("demo", "--data-dir", str(data), "--answers", rules)
    assert again.returncode == 1
    assert f"an earlier run of the demo dropped it. Delete {data / 'demo.db'} to start over." in again.stdout
    assert "no such table" not in again.stdout


def test_demo_against_a_server_of_another_database_does_not_blame_an_earlier_run(tmp_path: Path) -> None:
    """Against a server of another database, the demo said an earlier run of it had dropped its table."""
    other = tmp_path / "shop.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    connection.close()
    with safedb_serve(other) as server:
        result = safedb("demo", server.url, "--decline-all")
    assert result.returncode == 1
    assert (
        "The demo's table invoices is not there: the server serves another database, or an earlier run of the demo "
        "dropped it. Serve the demo database (`safedb serve` without --database;"
    ) in result.stdout
    assert "Step 1" not in result.stdout


def test_demo_against_a_server_with_several_targets_stops_after_its_first_step(tmp_path: Path, demo_db: Path) -> None:
    """Both steps failed ("Name a target"), and the demo still ended with its moral, as if it had shown it."""
    config = tmp_path / "safedb.toml"
    config.write_text(
        f'[server]\naudit_db = "{tmp_path / "audit.db"}"\n\n'
        f'[targets.dev]\ndatabase = "{demo_db}"\n\n[targets.other]\ndatabase = "{demo_db}"\n',
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "safedb", "serve", "--config", str(config), "--port", "0"]
    with serving_process(command) as server:
        result = safedb("demo", server.url, "--decline-all")
    assert result.returncode == 1
    assert "Name a target" in result.stdout
    assert result.stdout.rstrip().endswith(
        "The demo stops here: it needs a SafeDB server whose only target is the demo database."
    )
    assert "Step 2" not in result.stdout


def test_demo_in_a_data_directory_it_cannot_use_says_so_once(tmp_path: Path) -> None:
    """The demo's server said so and exited; the client then added "Error: Cannot talk to <the server's command
    line>: Connection closed", which misled."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    result = safedb("demo", "--data-dir", str(blocker / "data"), "--decline-all")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"Error: Cannot create the demo database in {blocker / 'data'}: Not a directory\n"
    assert blocker.read_text() == "not a directory\n"


def test_demo_against_a_running_server_approving(tmp_path: Path, demo_db: Path) -> None:
    rules = answers_file(
        tmp_path,
        {"rules": [{"message": "DROP TABLE invoices", "action": "accept",
                    "content": {"confirm": True, "justification": "demo", "environment": "Development"}}]},
    )  # fmt: skip
    with safedb_serve(demo_db) as server:
        result = safedb("demo", server.url, "--answers", rules)
    assert result.returncode == 0, result.stderr
    assert rows(demo_db, "SELECT name FROM sqlite_master WHERE name = 'invoices'") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["call", "ftp://example.com", "x"], "is not an http:// or https:// URL"),
        (["client", "http://127.0.0.1:9/mcp", "--stdio", "x"], "Give exactly one server"),
        (["call", "--stdio", "x", "http://127.0.0.1:9/mcp", "list_tables"], "Give exactly one server"),
        (["call", "--config", "nope.json", "tool"], "Cannot read config file nope.json"),
        (["call", "list_tables"], "Name the tool to call after the server's URL"),
        (["call", "--stdio", "x", "--server", "a", "tool"], "--server NAME picks one of the servers of a --config"),
        (["call", "--stdio", "x", "--header", "A: b", "tool"], "--header goes with a server's URL"),
        (["client", "--answers", "missing.json", "http://127.0.0.1:9/mcp"], "Cannot read answers file"),
        (["call", "http://127.0.0.1:9/mcp", "echo"], "Cannot talk to http://127.0.0.1:9/mcp"),
        (["client", "http://[::1/mcp", "-x", "tools"], "is not a valid URL: Invalid IPv6 URL"),
        (["client", "http://127.0.0.1:99999/mcp", "-x", "tools"], "is not a valid URL: Port out of range"),
        (["client", "http://127.0.0.1:abc/mcp", "-x", "tools"], "is not a valid URL: Port could not be cast"),
        (
            ["client", "http://127.0.0.1:9/mcp", "--header", "X-Name: café", "-x", "tools"],
            "The value of header 'X-Name' may only contain printable ASCII",
        ),
    ],
)
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    assert_one_clear_line(safedb(*args), message)


def test_a_config_file_with_one_server_needs_no_server_name(tmp_path: Path, demo_db: Path) -> None:
    serve = ["-m", "safedb", "serve", "--transport", "stdio", "--database", str(demo_db), "--log-level", "warning"]
    entry = {"command": sys.executable, "args": [*serve, "--audit-db", str(tmp_path / "audit.db")]}
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"mcpServers": {"demo": entry}}), encoding="utf-8")
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"mcpServers": {"demo": entry, "other": entry}}), encoding="utf-8")
    listed = safedb("call", "--config", str(one), "list_tables")
    assert listed.returncode == 0, listed.stderr
    assert "invoices" in listed.stdout
    declined = safedb("call", "--config", str(one), "--decline-all", "execute_query", "query=DELETE FROM invoices")
    assert "question answered decline (--decline-all)" in declined.stderr
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]
    assert_one_clear_line(
        safedb("call", "--config", str(two), "list_tables"),
        f"{two} has 2 servers: name one with --server NAME (it has: demo, other)",
    )


NOT_UTF8 = b"\xff\xfe{}"
NESTED_TOO_DEEPLY = b'{"rules": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
BAD_PORT = json.dumps({"mcpServers": {"a": {"url": "http://127.0.0.1:99999/mcp"}}})
NON_ASCII_HEADER = json.dumps({"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-é": "é"}}}})


@pytest.mark.parametrize(
    ("option", "content", "message"),
    [
        ("--answers", NOT_UTF8, "The answers file {path} is not UTF-8 text"),
        ("--answers", NESTED_TOO_DEEPLY, "The answers file {path} nests its JSON too deeply"),
        ("--config", NOT_UTF8, "The config file {path} is not UTF-8 text"),
        ("--config", b'{"servers": {"a": {"url": "x"} // no closing brace', "The config file {path} is not valid JSON"),
        ("--config", NESTED_TOO_DEEPLY, "The config file {path} nests its JSON too deeply"),
        ("--config", NON_ASCII_HEADER.encode(), "Server 'a': Header name 'X-é' may only contain ASCII"),
        ("--config", BAD_PORT.encode(), "Server 'a': 'http://127.0.0.1:99999/mcp' is not a valid URL"),
    ],
    ids=[
        "answers-not-utf8",
        "answers-nested-too-deeply",
        "config-not-utf8",
        "config-unclosed",
        "config-nested-too-deeply",
        "config-non-ascii-header",
        "config-bad-port",
    ],
)
def test_bad_files_are_one_clear_line(tmp_path: Path, option: str, content: bytes, message: str) -> None:
    path = tmp_path / "given.json"
    path.write_bytes(content)
    target = ["--server", "a"] if option == "--config" else ["http://127.0.0.1:9/mcp"]
    assert_one_clear_line(safedb("client", option, str(path), *target, "-x", "tools"), message.format(path=path))


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ({"rules": [{"msg": "x", "action": "accept"}]}, "rules[1].msg: is not a known key"),
        (
            {"rules": [{"action": "accept"}, {"action": "approve"}]},
            "rules[2].action: Input should be 'accept', 'decline' or 'cancel' (given: 'approve')",
        ),
        ({"rules": [{"message": "(", "action": "accept"}]}, "rules[1].message: not a valid regular expression"),
        # Past what `re` can count (OverflowError) or nest (RecursionError): both were tracebacks.
        (
            {"rules": [{"message": "(?i)x{99999999999}", "action": "decline"}]},
            "rules[1].message: not a valid regular expression: the repetition number is too large",
        ),
        (
            {"rules": [{"message": "(" * 2000 + ")" * 2000, "action": "decline"}]},
            "rules[1].message: not a valid regular expression: maximum recursion depth exceeded",
        ),
        ({"rules": [{}], "default": 3}, "rules[1].action: is required; default: Input should be"),
        ([], "the whole file: must be an object"),
    ],
)
def test_a_rules_file_of_the_wrong_shape_is_one_line_naming_the_place(tmp_path: Path, rules: Any, problem: str) -> None:
    path = answers_file(tmp_path, rules)
    result = safedb("call", "--answers", path, "http://127.0.0.1:9/mcp", "echo")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: Answers file {path} does not have the expected shape: {problem}")


def assert_one_clear_line(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode in (1, 2)
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_terminated_client_stops_the_stdio_server_it_started(tmp_path: Path, signal_name: str) -> None:
    """SIGTERM (a process manager) or SIGHUP (a closed terminal) ended the client at once, leaving its stdio server
    running; now they end it as Ctrl-C does, and the server is stopped with it."""
    pid_file = tmp_path / "server.pid"
    server = f"sh -c {shlex.quote(f'echo $$ > {shlex.quote(str(pid_file))}; exec sleep 600')}"
    command = [sys.executable, "-m", "safedb", "call", "--stdio", server, "some_tool"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    server_pid = 0
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as client:
        try:
            deadline = time.monotonic() + 30
            while not pid_file.exists() or not pid_file.read_text().strip():
                assert time.monotonic() < deadline, "the client did not start its stdio server"
                time.sleep(0.05)
            server_pid = int(pid_file.read_text())
            client.send_signal(getattr(signal, signal_name))
            _, stderr = client.communicate(timeout=30)
            assert client.returncode == 128 + getattr(signal, signal_name), stderr
            assert f"Stopped by {signal_name}." in stderr
            deadline = time.monotonic() + 10
            while _running(server_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _running(server_pid), "the stdio server outlived the client"
            assert "Traceback" not in stderr
        finally:
            if client.poll() is None:
                client.kill()
            if server_pid and _running(server_pid):
                os.kill(server_pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _safedb_with_stdout(stdout: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safedb", *args], stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, timeout=60, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )  # fmt: skip


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
@pytest.mark.parametrize("command", ["call", "client"])
def test_output_that_cannot_be_written_is_not_blamed_on_the_server(server_url: str, command: str) -> None:
    """A full disk under stdout was reported as 'Cannot talk to URL: [Errno 28] No space left on device'."""
    args = [server_url, "echo", "text=hi"] if command == "call" else [server_url, "-x", "echo text=hi"]
    with Path("/dev/full").open("w") as full:
        result = _safedb_with_stdout(full.fileno(), command, *args)
    assert result.returncode == 1
    assert result.stderr == "Error: Cannot write the output: No space left on device\n"


def test_a_reader_of_stdout_that_went_away_ends_the_session_quietly(demo_db: Path) -> None:
    """`safedb client --stdio ... | head` whose reader had gone said 'Cannot talk to COMMAND: [Errno 32] Broken
    pipe', blaming the server."""
    server = shlex.join([sys.executable, "-m", "safedb", "serve", "--transport", "stdio", "--database", str(demo_db)])
    reading, writing = os.pipe()
    os.close(reading)
    try:
        result = _safedb_with_stdout(writing, "client", "--stdio", server, "-x", "tools", "-x", "list_tables")
    finally:
        os.close(writing)
    assert result.returncode == 1
    assert "Error" not in result.stderr
    assert "Broken pipe" not in result.stderr
