"""The README's quickstart: exactly two commands, and they work as written on a fresh clone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

ROOT = Path(__file__).resolve().parent.parent
_SERVING = re.compile(r"serving .* at (http://\S+/mcp)")


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
    env = {**os.environ, "SAFEDB_PORT": "0", "SAFEDB_DATA_DIR": str(tmp_path / "data")}
    env.pop("VIRTUAL_ENV", None)
    process = subprocess.Popen(
        ["bash", "-c", f"exec {serve}" if serve.startswith("exec") else serve],
        cwd=clone, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    found: list[str] = []
    log: list[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            if not found and (match := _SERVING.search(line)):
                found.append(match.group(1))
                listening.set()
        listening.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert listening.wait(timeout=600), "the serve command did not start in time:\n" + "".join(log)
        assert found, "the serve command exited:\n" + "".join(log)

        async def query() -> list[list[object]]:
            async with Client(found[0]) as client:
                result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM users"})
            assert result.structured_content is not None
            return list(result.structured_content["rows"])

        assert anyio.run(query) == [[5]]
        assert (tmp_path / "data" / "demo.db").exists()
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=20)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
