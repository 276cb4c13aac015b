"""The README's quickstart: exactly two commands, and they work as written on a fresh clone."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from tests.helpers import serving_process

ROOT = Path(__file__).resolve().parent.parent


def quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.DOTALL)


def test_quickstart_has_exactly_two_commands() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2
    serve, test = commands
    assert "safedb serve" in serve
    assert "pytest" in test


def test_ci_runs_the_readme_test_command() -> None:
    _, test = quickstart_commands()
    assert test in (ROOT / ".ci" / "run").read_text()


@pytest.mark.slow
def test_serve_command_works_on_a_fresh_clone(tmp_path: Path) -> None:
    """Clone the repository, run the README's serve command as written, and query the demo database."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the README test needs git and a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    serve, _ = quickstart_commands()
    env = {"SAFEDB_PORT": "0", "SAFEDB_DATA_DIR": str(tmp_path / "data")}
    with serving_process(["bash", "-c", serve], env=env, cwd=clone, start_timeout=600) as server:

        async def query() -> list[list[object]]:
            async with Client(server.url) as client:
                result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM users"})
            assert result.structured_content is not None
            return list(result.structured_content["rows"])

        assert anyio.run(query) == [[5]]
        assert (tmp_path / "data" / "demo.db").exists()
