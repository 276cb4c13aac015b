"""Defects found by red-teaming the client, each pinned by the behaviour a person or a server sees.

Real parts throughout: MCP servers in processes of their own, a raw HTTP server for a hostile handshake,
the terminal form through prompt_toolkit's pipe input, `safedb call` as a process.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from safedb.client import connection as connection_module
from safedb.client.connection import connect
from safedb.client.form import TerminalAnswerer
from safedb.client.model import schema_to_model
from safedb.client.sanitize import clean_text
from safedb.client.schema import UnsupportedSchema, parse_requested_schema
from safedb.client.targets import http_target
from safedb.client.urls import review_url
from tests.client.servers import ROOT
from tests.client.test_commands import ERAS, answers_file
from tests.client.test_real_terminal import Tmux, require_tmux
from tests.client.test_terminal_form import lines, terminal
from tests.helpers import serving_process

REDTEAM_SERVER = [sys.executable, "-m", "tests.client.redteam_server", "--port", "0"]


def safedb(*args: str) -> subprocess.CompletedProcess[str]:
    """`safedb ARGS` as a process, running this checkout's code (its `src` first on the path)."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "safedb", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        input="",
        env={**os.environ, "PYTHONPATH": path},
    )


@pytest.fixture(scope="module")
def redteam_url() -> Iterator[str]:
    ready = re.compile(r"listening at (http://\S+/mcp)")
    with serving_process(REDTEAM_SERVER, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, ready=ready) as server:
        yield server.url


# -- server text: every bidirectional control is removed, and Unicode's line separators break lines -------------


@pytest.mark.parametrize(
    ("text", "multiline", "shown"),
    [
        ("Delete \u061c10 rows", True, "Delete 10 rows"),  # the Arabic letter mark, a bidi mark like U+200F
        ("first\u2028second\u2029third", True, "first\nsecond\nthird"),
        ("Target\u2028environment", False, "Target environment"),  # a terminal shows U+2028 as nothing
    ],
)
def test_bidi_marks_and_line_separators(text: str, multiline: bool, shown: str) -> None:
    assert clean_text(text, multiline=multiline) == shown


# -- URL mode: a host that browsers read differently from Python is never opened -------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example\\.good.example/approve",  # browsers: host evil.example (a backslash is "/")
        "https://evil.example\\good.example/approve",
        "https://ev%69l.example/approve",  # browsers: host evil.example (percent-decoded)
        "https://good.example%2eevil.example/approve",  # browsers: host good.example.evil.example
    ],
)
def test_a_host_that_browsers_read_differently_is_not_opened(url: str) -> None:
    review = review_url(url)
    assert not review.openable
    assert review.reason == "the host has characters that browsers drop or read differently"


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_backslash_url_is_not_opened_even_when_the_person_asks(redteam_url: str, era: str) -> None:
    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    with terminal(lines("o", "d")) as screen:
        async with connect(http_target(redteam_url), TerminalAnswerer(open_url), era) as connection:
            with anyio.fail_after(30):
                result = await connection.call_tool("ask_url_to", {"url": "https://evil.example\\.good.example/"})
    assert opened == []
    assert result.structured_content == {"page": {"action": "decline"}}
    assert "This URL will not be opened." in screen.getvalue()


# -- patterns: ECMA-262's \s is Unicode white space, not only ASCII -----------------------------------------------

NO_SPACES = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^\\S+$"}}, "required": ["code"]}


@pytest.mark.parametrize("space", ["\u00a0", "\u2003", "\u3000", "\ufeff", "\u202f"])
def test_a_pattern_without_white_space_refuses_unicode_spaces(space: str) -> None:
    model = schema_to_model(NO_SPACES)
    with pytest.raises(ValueError, match="must match the pattern"):
        model.model_validate({"code": f"a{space}b"})
    assert model.model_validate({"code": "a-b"}).model_dump(by_alias=True) == {"code": "a-b"}
    assert schema_to_model(
        {"type": "object", "properties": {"gap": {"type": "string", "pattern": "^a[\\s]b$"}}}
    ).model_validate({"gap": f"a{space}b"})


def test_a_dash_after_a_white_space_class_is_a_dash_not_a_range() -> None:
    model = schema_to_model({"type": "object", "properties": {"x": {"type": "string", "pattern": "^[\\s-\\uffff]$"}}})
    assert model.model_validate({"x": "-"}).model_dump(by_alias=True) == {"x": "-"}
    with pytest.raises(ValueError, match="must match the pattern"):
        model.model_validate({"x": "\uff10"})  # ECMA-262: \s, "-" and U+FFFF, not a range from U+FEFF


@pytest.mark.parametrize("era", ERAS)
def test_rule_content_with_a_unicode_space_the_pattern_forbids_is_never_sent(
    tmp_path: Path, server_url: str, era: str
) -> None:
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": {"code": "a\u00a0b"}}]})
    arguments = f"requested_schema:={json.dumps(NO_SPACES)}"
    result = safedb("call", "--json", "--era", era, "--answers", rules, server_url, "ask_for", arguments)
    assert json.loads(result.stdout)["structuredContent"] == {"form": {"action": "cancel"}}


@pytest.mark.parametrize(
    "pattern",
    [
        "^a{,3}$",  # ECMA-262: the text "a{,3}"; Python: up to three a's
        "^\\Aok$",  # ECMA-262: "Aok"; Python: "ok"
        "^(?i)ok$",  # Python's own inline flags
        "^(?P<x>ok)$",
        "^[\\S]+$",  # no Python equivalent
        "^a[]b$",  # ECMA-262: never matches
        "^[^]*$",  # ECMA-262: anything
    ],
)
def test_patterns_the_two_dialects_read_differently_are_refused(pattern: str) -> None:
    with pytest.raises(UnsupportedSchema, match="cannot be checked here"):
        parse_requested_schema({"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}})


# -- sizes beyond 64 bits ----------------------------------------------------------------------------------------

HUGE = 2**70
HUGE_LIMITS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": HUGE},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": HUGE},
    },
    "required": ["name"],
}


@pytest.mark.parametrize("era", ERAS)
def test_lengths_beyond_64_bits_are_read_as_the_limits_they_are(tmp_path: Path, server_url: str, era: str) -> None:
    rules = answers_file(tmp_path, {"rules": [{"action": "accept", "content": {"name": "Ada", "tags": ["a"]}}]})
    arguments = f"requested_schema:={json.dumps(HUGE_LIMITS)}"
    result = safedb("call", "--json", "--era", era, "--answers", rules, server_url, "ask_for", arguments)
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["structuredContent"] == {
        "form": {"action": "accept", "content": {"name": "Ada", "tags": ["a"]}}
    }


def test_a_minimum_length_beyond_64_bits_can_never_be_met() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": HUGE}}}
    with pytest.raises(ValueError, match="at least"):
        schema_to_model(schema).model_validate({"name": "Ada"})


# -- a hostile handshake: the error the server answers with reaches the terminal cleaned, on one line ------------

HOSTILE_MESSAGE = "go away\x1b]0;PWNED\x07\x1b[2J\x1b[31m now\nsecond line\x9b1m"


class _RefusingHandler(BaseHTTPRequestHandler):
    """Answers every JSON-RPC request (initialize, server/discover) with an error full of escape sequences."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        body = {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32000, "message": HOSTILE_MESSAGE}}
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.send_response(405)
        self.end_headers()


@pytest.fixture
def refusing_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("era", ["auto", "handshake"])
def test_a_servers_error_at_connect_time_is_one_clean_line(refusing_url: str, era: str) -> None:
    result = safedb("call", "--era", era, refusing_url, "echo", "text=x")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line == f"Error: Cannot talk to {refusing_url}: go away now"


# -- config files: values of the wrong type are refused, numbers and true/false read as other hosts read them ------

REDTEAM_STDIO = [sys.executable, "-m", "tests.client.redteam_server", "--stdio"]


def config_file(tmp_path: Path, entry: dict[str, Any]) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": entry}}))
    return str(path)


def test_env_numbers_and_booleans_reach_a_stdio_server_as_their_json_text(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "PORT": 8080, "DEBUG": True, "RATIO": 0.5}
    config = config_file(tmp_path, {"command": REDTEAM_STDIO[0], "args": REDTEAM_STDIO[1:], "env": env})
    shown = [
        safedb("call", "--config", config, "--server", "a", "environment", f"name={name}").stdout.strip()
        for name in ("PORT", "DEBUG", "RATIO")
    ]
    assert shown == ["8080", "true", "0.5"]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"command": "true", "env": {"X": None}}, "Server 'a': 'env' must be an object of strings (the value of 'X'"),
        ({"command": "true", "env": {"X": ["a"]}}, "Server 'a': 'env' must be an object of strings (the value of 'X'"),
        ({"command": ["python", "-V"]}, "Server 'a': 'command' must be a string"),
        ({"command": "true", "cwd": 3}, "Server 'a': 'cwd' must be a string"),
        ({"url": "http://127.0.0.1:9/mcp", "headers": ["X-A: b"]}, "Error: Server 'a': 'headers' must be an object"),
    ],
)
def test_config_values_of_the_wrong_type_are_one_clear_line(
    tmp_path: Path, entry: dict[str, Any], problem: str
) -> None:
    result = safedb("client", "--config", config_file(tmp_path, entry), "--server", "a", "-x", "tools")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert problem in line


# -- a server that takes the connection but never answers is reported, not waited for for a day ------------------


class _SilentHandler(BaseHTTPRequestHandler):
    """Reads each request and never answers it (until the test ends)."""

    released = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.released.wait(60)

    do_GET = do_POST


@pytest.fixture
def silent_url() -> Iterator[str]:
    handler = type("Silent", (_SilentHandler,), {"released": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        handler.released.set()
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["auto", "handshake", "2026-07-28"])
async def test_a_server_that_never_answers_the_handshake_is_reported(
    silent_url: str, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection_module, "REQUEST_TIMEOUT", 0.5)
    reported: list[str] = []
    with anyio.fail_after(20):
        try:
            async with connect(http_target(silent_url), TerminalAnswerer(), era):
                pass
        except* MCPError as group:
            reported = [str(error) for error in _leaves(group)]
    assert reported
    assert all(re.fullmatch(r"Request '(initialize|server/discover)' timed out", text) for text in reported)


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [
        leaf
        for error in group.exceptions
        for leaf in (_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_call_may_take_longer_than_the_request_timeout(
    redteam_url: str, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection_module, "REQUEST_TIMEOUT", 0.5)
    async with connect(http_target(redteam_url), TerminalAnswerer(), era) as connection:
        with anyio.fail_after(20):
            result = await connection.call_tool("slow", {"seconds": 1.5})
    assert result.structured_content == {"result": "done"}


@pytest.fixture(scope="module")
def delete_hanging_url() -> Iterator[str]:
    """The red-team server, never answering the DELETE that ends a session."""
    ready = re.compile(r"listening at (http://\S+/mcp)")
    command = [*REDTEAM_SERVER, "--hang-on", "DELETE"]
    with serving_process(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, ready=ready) as server:
        yield server.url


@pytest.mark.anyio
async def test_a_server_that_never_answers_the_session_end_does_not_keep_the_client(
    delete_hanging_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection_module, "SESSION_END_TIMEOUT", 0.5)
    with anyio.fail_after(20):
        async with connect(http_target(delete_hanging_url), TerminalAnswerer(), "handshake") as connection:
            result = await connection.call_tool("slow", {"seconds": 0})
    assert result.structured_content == {"result": "done"}


# -- Ctrl-C while a call runs, in a real terminal: the call stops, the session goes on ----------------------------


def _outcomes(url: str) -> str:
    return safedb("call", url, "slow_outcomes").stdout


@pytest.mark.slow
@pytest.mark.parametrize(("era", "seconds"), [("handshake", 30.5), ("2026-07-28", 31.5)])
def test_ctrl_c_while_a_call_runs_stops_the_call_not_the_session(redteam_url: str, era: str, seconds: float) -> None:
    require_tmux()
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    client = shlex.join(["env", f"PYTHONPATH={path}", sys.executable, "-m", "safedb", "client", "--era", era])
    # The shell outlives the Ctrl-C (its trap is reset to the default in the client) to report how the client ended.
    script = f"trap : INT; {client} {shlex.quote(redteam_url)}; echo EXIT=$?; sleep 60"
    terminal = Tmux(["sh", "-c", script])
    try:
        at = terminal.wait_for("Red Team Server>")
        terminal.type(f"slow seconds={seconds}")
        deadline = time.monotonic() + 30
        while f"slow {seconds} started" not in _outcomes(redteam_url):  # the call reached the server
            assert time.monotonic() < deadline, "the call never reached the server"
        terminal.press("C-c")
        at = terminal.wait_for("Interrupted.", after=at)
        terminal.type("slow_outcomes")
        at = terminal.wait_for(f"slow {seconds} cancelled", after=at)  # the server was told, and stopped it
        terminal.type("quit")
        terminal.wait_for("EXIT=0", after=at)
    finally:
        terminal.close()
