"""The README's client configuration snippets (VS Code, Claude Code, Cursor) and its compatibility table.

Every snippet is parsed from README.md: JSON must be valid, an HTTP URL must be the default endpoint of
`safedb serve`, and a stdio command line must really start `safedb serve --transport stdio` and answer
`tools/list` through the MCP SDK's stdio client. The compatibility table must list exactly the suite's cases.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from safedb.cli import serve
from safedb.db.demo import ensure_demo_database
from tests.client.servers import ROOT
from tests.interop.clients import CASES
from tests.interop.report import CLIENT_HEADER, END, START, client_key_columns, client_row

HOSTS = ("VS Code", "Claude Code", "Cursor")
_BLOCK = re.compile(r"```(?P<language>\w+)\n(?P<body>.*?)\n```", re.DOTALL)


def subsection(title: str) -> str:
    """The text under `### title` in README.md's client configuration, up to the next heading."""
    readme = (ROOT / "README.md").read_text()
    configuration = readme.split("\n## Client configuration\n", 1)[1].split("\n## ", 1)[0]
    return re.split(r"\n#{1,3} ", configuration.split(f"\n### {title}\n", 1)[1], maxsplit=1)[0]


def snippets(host: str) -> list[tuple[str, str]]:
    return [(m["language"], m["body"]) for m in _BLOCK.finditer(subsection(host))]


def default_url() -> str:
    defaults = {parameter.name: parameter.default for parameter in serve.params}
    return f"http://{defaults['host']}:{defaults['port']}/mcp"


def configured_servers(host: str) -> list[dict[str, Any]]:
    """Every server entry of the host's snippets, as a dict with `url` or `command` and `args`."""
    servers: list[dict[str, Any]] = []
    for language, body in snippets(host):
        if language == "json":
            document = json.loads(body)
            key = "servers" if host == "VS Code" else "mcpServers"
            servers += list(document[key].values())
        elif language == "sh":
            for line in body.splitlines():
                words = shlex.split(line)
                assert words[:3] == ["claude", "mcp", "add"], line
                if "--" in words:
                    command = words[words.index("--") + 1 :]
                    servers.append({"command": command[0], "args": command[1:]})
                else:
                    assert words[3:5] == ["--transport", "http"], line
                    servers.append({"type": "http", "url": words[-1]})
        else:
            pytest.fail(f"unexpected {language} snippet for {host}")
    return servers


def test_every_host_has_an_http_and_a_stdio_snippet() -> None:
    for host in HOSTS:
        servers = configured_servers(host)
        assert [("url" in server, "command" in server) for server in servers] == [(True, False), (False, True)], host


@pytest.mark.parametrize("host", HOSTS)
def test_http_snippet_points_at_the_default_endpoint(host: str) -> None:
    (server,) = [server for server in configured_servers(host) if "url" in server]
    assert server["url"] == default_url()
    if host == "VS Code":
        assert server["type"] == "http"


@pytest.mark.slow
@pytest.mark.parametrize("host", HOSTS)
def test_stdio_snippet_starts_safedb_and_answers_tools_list(host: str, tmp_path: Path) -> None:
    (server,) = [server for server in configured_servers(host) if "command" in server]
    if host == "VS Code":
        assert server["type"] == "stdio"
    assert server["command"] == "safedb"
    assert server["args"][:3] == ["serve", "--transport", "stdio"]
    database = server["args"][server["args"].index("--database") + 1]
    shutil.copy(ensure_demo_database(tmp_path / "demo"), tmp_path / database)
    # The snippet as written, with `safedb` resolved to this environment's command, run where `app.db` is.
    executable = Path(sys.executable).parent / "safedb"
    assert executable.exists(), f"{executable} is missing: install the project with pip install -e ."
    parameters = StdioServerParameters(
        command=str(executable), args=server["args"], cwd=tmp_path,
        env={"SAFEDB_AUDIT_DB": str(tmp_path / "audit.db"), "SAFEDB_LOG_LEVEL": "warning"},
    )  # fmt: skip

    async def list_tools() -> tuple[list[str], list[list[Any]]]:
        with anyio.fail_after(60):
            async with Client(parameters, mode="legacy") as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                read = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM users"})
        assert read.structured_content is not None
        return tools, read.structured_content["rows"]

    tools, counted = anyio.run(list_tools)
    assert sorted(tools) == ["describe_table", "execute_query", "list_tables"]
    assert counted == [[5]]  # the database named in the snippet, not another one


def test_compatibility_table_lists_exactly_the_suites_cases() -> None:
    readme = (ROOT / "README.md").read_text()
    assert readme.count(START) == 1
    assert readme.count(END) == 1
    table = readme.split(START, 1)[1].split(END, 1)[0]
    lines = table.splitlines()
    start = lines.index(CLIENT_HEADER) + 2
    rows = lines[start : start + len(CASES)]
    assert [client_key_columns(row) for row in rows] == [client_key_columns(client_row(c, None)) for c in CASES]
    assert all(row.endswith("| pass |") for row in rows), "regenerate the table after a green run"
    assert table.count("| pass |") == len(CASES) + 2  # every client case and both conformance eras
