"""Variables in mcp.json files (`${env:NAME}`, `${input:ID}`, `${workspaceFolder}`...) are substituted as VS Code and
Cursor substitute them, in the values they substitute them in.

`safedb call --config` runs as a process against a real stdio server (tests/client/redteam_server.py) that reports
its command line, working directory and environment; an input is typed into a real terminal (tmux).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from safedb.client.targets import HttpTarget, StdioTarget, TargetError, config_target
from tests.client.servers import ROOT
from tests.client.test_real_terminal import Tmux, require_tmux

TOKEN_INPUT = {"type": "promptString", "id": "token", "description": "API token", "password": True}
REPORTED = ["PYTHONPATH", "TOKEN", "HOME_SEEN", "BASENAME", "SEPARATED", "UNSET", "UNKNOWN", "NESTED", "SHELL_STYLE"]
ENVIRONMENT = {
    "SAFEDB_TEST_PYTHON": sys.executable,
    "SAFEDB_TEST_MODULE": "tests.client.redteam_server",
    "SAFEDB_TEST_ROOT": str(ROOT),
}


def vscode_config(tmp_path: Path, env: dict[str, Any] | None = None) -> Path:
    """A VS Code workspace config (PROJECT/.vscode/mcp.json, with comments) for the red-team server over stdio, which
    it names through variables only."""
    path = tmp_path / "project" / ".vscode" / "mcp.json"
    path.parent.mkdir(parents=True)
    entry = {
        "type": "stdio",
        "command": "${env:SAFEDB_TEST_PYTHON}",
        "args": ["-m", "${env:SAFEDB_TEST_MODULE}", "--stdio"],
        "cwd": "${workspaceFolder}",
        "env": {"PYTHONPATH": "${env:SAFEDB_TEST_ROOT}", **(env or {})},
    }
    path.write_text("// written by the test\n" + json.dumps({"inputs": [TOKEN_INPUT], "servers": {"a": entry}}))
    return path


def safedb_call(*args: str) -> subprocess.CompletedProcess[str]:
    """`safedb call ARGS` as a process without a terminal, running this checkout's code."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env = {**os.environ, **ENVIRONMENT, "PYTHONPATH": path}
    env.pop("SAFEDB_TEST_SURELY_UNSET", None)
    return subprocess.run(
        [sys.executable, "-m", "safedb", "call", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT, input="", env=env,
    )  # fmt: skip


def test_variables_reach_the_server_as_vscode_would_resolve_them(tmp_path: Path) -> None:
    config = vscode_config(
        tmp_path,
        {
            "TOKEN": "Bearer ${input:token}",
            "HOME_SEEN": "${userHome}",
            "BASENAME": "${workspaceFolderBasename}",
            "SEPARATED": "a${/}b${pathSeparator}c",
            "UNSET": "[${env:SAFEDB_TEST_SURELY_UNSET}]",  # VS Code: empty, as in a shell
            "UNKNOWN": "${notAVariable}",  # VS Code leaves what it does not know as written
            "NESTED": "${env:${SAFEDB_TEST_MODULE}}",  # and does not resolve nested variables
            "SHELL_STYLE": "${SAFEDB_TEST_MODULE}",  # not a VS Code variable
        },
    )
    names = f"names:={json.dumps(REPORTED)}"
    result = safedb_call(
        "--json", "--config", str(config), "--server", "a", "--input", "token=s3cret", "process_facts", names
    )
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)["structuredContent"]
    assert facts["cwd"] == str(tmp_path / "project")  # the folder holding .vscode
    assert facts["argv"][1:] == ["--stdio"]  # the module ran: its name came from the environment
    assert facts["env"] == {
        "PYTHONPATH": str(ROOT),
        "TOKEN": "Bearer s3cret",
        "HOME_SEEN": str(Path.home()),
        "BASENAME": "project",
        "SEPARATED": f"a{os.sep}b{os.sep}c",
        "UNSET": "[]",
        "UNKNOWN": "${notAVariable}",
        "NESTED": "${env:${SAFEDB_TEST_MODULE}}",
        "SHELL_STYLE": "${SAFEDB_TEST_MODULE}",
    }
    warning = "Warning: ${env:SAFEDB_TEST_SURELY_UNSET}: the environment variable SAFEDB_TEST_SURELY_UNSET is not set"
    assert warning in result.stderr


def test_an_input_without_a_terminal_to_ask_in_is_one_clear_line(tmp_path: Path) -> None:
    config = vscode_config(tmp_path, {"TOKEN": "${input:token}"})
    result = safedb_call("--config", str(config), "--server", "a", "process_facts", "names:=[]")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: Server 'a': ${input:token} needs a value (API token) and there is no terminal to ask for it: "
        "pass --input token=VALUE"
    ]


@pytest.mark.slow
def test_an_input_is_asked_in_the_terminal_without_showing_what_is_typed(tmp_path: Path) -> None:
    require_tmux()
    config = vscode_config(tmp_path, {"TOKEN": "${input:token}", "AGAIN": "${input:token}"})
    settings = [f"{name}={value}" for name, value in ENVIRONMENT.items()]
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    command = ["env", f"PYTHONPATH={path}", *settings, sys.executable, "-m", "safedb", "call", "--config", str(config),
               "--server", "a", "process_facts", 'names:=["TOKEN", "AGAIN"]']  # fmt: skip
    terminal = Tmux(["sh", "-c", f"cd {shlex.quote(str(ROOT))}; {shlex.join(command)}; echo EXIT=$?; sleep 60"])
    try:
        at = terminal.wait_for("API token: ")
        terminal.type("typed-secret-42")
        terminal.wait_for("EXIT=0", after=at)
        screen = terminal.screen()
        # Shown once, in the server's answer (asked once for both uses), never as it was typed.
        assert screen.count("typed-secret-42") == 2
        assert screen.count("API token:") == 1
        assert '"TOKEN": "typed-secret-42"' in screen
        assert '"AGAIN": "typed-secret-42"' in screen
    finally:
        terminal.close()


# -- where and how variables are resolved (the config file read as the command reads it) ---------------------------


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_url_and_headers_of_a_cursor_entry_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAFEDB_TEST_HOST", "127.0.0.1:8123")
    monkeypatch.setenv("SAFEDB_TEST_KEY", "k-1")
    entry = {"url": "http://${env:SAFEDB_TEST_HOST}/mcp", "headers": {"Authorization": "Bearer ${env:SAFEDB_TEST_KEY}"}}
    config = write_config(tmp_path / ".cursor" / "mcp.json", {"mcpServers": {"a": entry}})
    assert config_target(config, "a") == HttpTarget("http://127.0.0.1:8123/mcp", {"Authorization": "Bearer k-1"})


def test_an_mcp_servers_file_takes_claude_codes_variables_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code's `.mcp.json` writes `${NAME}` and `${NAME:-default}`; VS Code's `servers` files leave them."""
    monkeypatch.setenv("SAFEDB_TEST_KEY", "k-1")
    monkeypatch.setenv("SAFEDB_TEST_EMPTY", "")
    monkeypatch.delenv("SAFEDB_TEST_SURELY_UNSET", raising=False)
    entry = {
        "command": "${SAFEDB_TEST_SURELY_UNSET:-npx}",
        "args": ["--key=${SAFEDB_TEST_KEY}", "${SAFEDB_TEST_EMPTY:-fallback}", "${SAFEDB_TEST_KEY:-unused}"],
        "env": {
            "UNSET": "${SAFEDB_TEST_SURELY_UNSET}",  # passed as written, as Claude Code passes it
            "VSCODE": "${env:SAFEDB_TEST_KEY}",
            "NOT_A_NAME": "${1x}",
        },
    }
    claude = write_config(tmp_path / ".mcp.json", {"mcpServers": {"a": entry}})
    vscode = write_config(tmp_path / ".vscode" / "mcp.json", {"servers": {"a": entry}})
    assert config_target(claude, "a") == StdioTarget(
        "npx",
        ("--key=k-1", "fallback", "k-1"),
        {"UNSET": "${SAFEDB_TEST_SURELY_UNSET}", "VSCODE": "k-1", "NOT_A_NAME": "${1x}"},
    )
    assert config_target(vscode, "a") == StdioTarget(
        "${SAFEDB_TEST_SURELY_UNSET:-npx}",
        ("--key=${SAFEDB_TEST_KEY}", "${SAFEDB_TEST_EMPTY:-fallback}", "${SAFEDB_TEST_KEY:-unused}"),
        {"UNSET": "${SAFEDB_TEST_SURELY_UNSET}", "VSCODE": "k-1", "NOT_A_NAME": "${1x}"},
    )


def test_workspace_folder_outside_a_workspace_config_is_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    entry = {"command": "server", "args": ["--root", "${workspaceFolder}"], "cwd": "${userHome}"}
    config = write_config(tmp_path / "config" / "mcp.json", {"servers": {"a": entry}})
    assert config_target(config, "a") == StdioTarget("server", ("--root", str(tmp_path)), None, str(Path.home()))


def test_an_input_is_asked_once_per_id_with_its_declaration(tmp_path: Path) -> None:
    inputs = [TOKEN_INPUT, {"type": "promptString", "id": "user", "description": "User", "default": "ada"}]
    entry = {"command": "server", "args": ["${input:user}", "${input:token}"], "env": {"T": "${input:token}"}}
    config = write_config(tmp_path / "mcp.json", {"inputs": inputs, "servers": {"a": entry}})
    asked = []

    def ask(declared: Any) -> str:
        asked.append((declared.id, declared.description, declared.password, declared.default))
        return f"<{declared.id}>"

    assert config_target(config, "a", ask=ask) == StdioTarget("server", ("<user>", "<token>"), {"T": "<token>"})
    assert asked == [("user", "User", False, "ada"), ("token", "API token", True, "")]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("${env}", "${env} names no environment variable"),
        ("${env:}", "${env:} names no environment variable"),
        ("${input:nope}", "${input:nope}: the config file's 'inputs' declare no input with the id 'nope'"),
        ("${input:pick}", "${input:pick}: only inputs of type 'promptString' can be asked here, not 'pickString'"),
        ("${config:python.path}", "${config:python.path} refers to the editor (VS Code), which safedb client is not"),
        ("${file}", "${file} refers to the editor (VS Code)"),
        ("${workspaceFolder:other}", "${workspaceFolder:other}: only the one workspace folder is known here"),
    ],
)
def test_variables_that_cannot_be_resolved_are_one_clear_error(tmp_path: Path, value: str, problem: str) -> None:
    inputs = [{"type": "pickString", "id": "pick", "options": ["a", "b"]}]
    config = write_config(
        tmp_path / "mcp.json", {"inputs": inputs, "servers": {"a": {"command": "x", "args": [value]}}}
    )
    with pytest.raises(TargetError) as raised:
        config_target(config, "a", ask=lambda declared: "never asked")
    assert str(raised.value).startswith(f"Server 'a': {problem}")


def test_an_unset_environment_variable_is_empty_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAFEDB_TEST_SURELY_UNSET", raising=False)
    config = write_config(
        tmp_path / "mcp.json", {"servers": {"a": {"command": "x", "env": {"K": "${env:SAFEDB_TEST_SURELY_UNSET}"}}}}
    )
    warnings: list[str] = []
    assert config_target(config, "a", warn=warnings.append) == StdioTarget("x", (), {"K": ""})
    assert warnings == [
        "${env:SAFEDB_TEST_SURELY_UNSET}: the environment variable SAFEDB_TEST_SURELY_UNSET is not set; it gives an "
        "empty value"
    ]


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "server\x00x"},
        {"command": "server", "args": ["a\x00b"]},
        {"command": "server", "env": {"KEY\x00": "v"}},
        {"command": "server", "env": {"KEY": "v\x00"}},
        {"command": "server", "cwd": "/tmp\x00"},
    ],
)
def test_a_nul_character_in_a_stdio_entry_is_refused_in_one_line(tmp_path: Path, entry: dict[str, Any]) -> None:
    """Starting the server failed with a traceback (`ValueError: embedded null byte`)."""
    config = write_config(tmp_path / "mcp.json", {"mcpServers": {"a": entry}})
    with pytest.raises(TargetError, match="contain a NUL character"):
        config_target(config, "a")


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"url": "http://127.0.0.1:9/mcp", "type": "stdio"}, "has a 'url' but type 'stdio'"),
        ({"url": "http://127.0.0.1:9/mcp", "command": "server"}, "has both a 'url' and a 'command'"),
        ({"command": ""}, "'command' is empty"),
        ({"command": 5}, "'command' must be a string"),
    ],
)
def test_an_entry_at_odds_with_itself_says_how(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    """A url with type stdio was reported as a type not supported, and an empty command as not a string; of a url and
    a command, the command was silently ignored."""
    config = write_config(tmp_path / "mcp.json", {"mcpServers": {"a": entry}})
    with pytest.raises(TargetError, match=problem):
        config_target(config, "a")


def test_a_disabled_server_is_connected_to_with_a_warning(tmp_path: Path) -> None:
    """Hosts do not start a server marked `"disabled": true`; named, it was connected to without a word."""
    entry = {"url": "http://127.0.0.1:9/mcp", "disabled": True}
    config = write_config(tmp_path / "mcp.json", {"mcpServers": {"a": entry}})
    warnings: list[str] = []
    target = config_target(config, None, warn=warnings.append)
    assert target.describe() == "http://127.0.0.1:9/mcp"
    assert warnings == [f"Server 'a' is marked disabled in {config}; connecting to it all the same, as asked."]
