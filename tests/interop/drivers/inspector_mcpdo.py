"""Driver for MCP Inspector's `mcpdo` (connect once, then one command per request, through a daemon), era
`legacy` or `modern`, over Streamable HTTP or stdio. Elicitations come back from `tools/call` as
`elicitationPending` and are answered with `elicitation/respond`.

Standard library only. `HOME` is a fresh temporary directory (the daemon's socket, catalog and logs live
there), secrets stay in memory, and the daemon is always stopped at the end. Config `extra`: `node` (Node 24)
and `mcpdo` (the package's bin script). See scenario.py for the protocol with the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from scenario import Config, Recorder, emit, first_text, load_config, run_steps

CONNECTION = "safedb"


class Mcpdo:
    def __init__(self, config: Config, home: Path) -> None:
        self.node = str(config.extra["node"])
        self.script = str(config.extra["mcpdo"])
        self.home = home
        self.env = {
            **os.environ,
            "HOME": str(home),
            "MCP_INSPECTOR_SECRET_STORE": "memory",
            "PATH": str(Path(self.node).parent) + os.pathsep + os.environ.get("PATH", ""),
        }

    def run(self, *arguments: str) -> Any:
        command = [self.node, self.script, "--format", "json", *arguments]
        result = subprocess.run(command, capture_output=True, text=True, timeout=90, env=self.env, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"mcpdo {arguments[0]} exited {result.returncode}: {result.stdout}{result.stderr}")
        return json.loads(result.stdout) if result.stdout.strip() else None

    def stop_daemon(self) -> None:
        """`mcpdo daemon stop`, then wait (bounded) for the daemon process to be gone, killing it if need be."""
        pid = self._daemon_pid()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [self.node, self.script, "daemon", "stop"], capture_output=True, timeout=30, env=self.env, check=False
            )
        if pid is None:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _daemon_pid(self) -> int | None:
        try:
            return int((self.home / ".mcp-inspector" / "mcpdod.lock").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


async def main() -> None:
    config = load_config()
    recorder = Recorder(config)
    home = Path(tempfile.mkdtemp(prefix="mcpdo-home-"))
    mcpdo = Mcpdo(config, home)
    try:
        era = ["--era", config.mode, "--connection", CONNECTION, "--elicit", "form"]
        if config.url is not None:
            mcpdo.run("connect", config.url, *era)
        else:
            assert config.command is not None
            environment = [item for key, value in config.env.items() for item in ("-e", f"{key}={value}")]
            mcpdo.run("connect", *era, *environment, "--", config.command, *config.args)
        shown = mcpdo.run("connections/show", CONNECTION)
        tools = [tool["name"] for tool in mcpdo.run("tools/list", "--connection", CONNECTION)["tools"]]

        async def call(sql: str) -> tuple[bool, dict[str, Any] | None, str]:
            arguments = json.dumps({"query": sql})
            result = mcpdo.run("tools/call", "--connection", CONNECTION, "execute_query", "--tool-args-json", arguments)
            for _ in range(5):
                pending = result.get("elicitationPending") if isinstance(result, dict) else None
                if pending is None:
                    break
                action = recorder.asked(pending.get("message", ""), pending.get("requestedSchema"), pending["mode"])
                answer = [json.dumps(config.answer)] if action == "accept" else ["--decline"]
                result = mcpdo.run("elicitation/respond", "--connection", CONNECTION, pending["elicitationId"], *answer)
            return bool(result.get("isError")), result.get("structuredContent"), first_text(result.get("content", []))

        await run_steps(recorder, call)
        emit("MCP Inspector mcpdo", _version(mcpdo), shown.get("protocolVersion"), tools, recorder)
    finally:
        mcpdo.stop_daemon()
        shutil.rmtree(home, ignore_errors=True)


def _version(mcpdo: Mcpdo) -> str:
    """The version in the package.json of @modelcontextprotocol/inspector, the package `mcpdo` comes from."""
    for directory in Path(mcpdo.script).resolve().parents:
        manifest = directory / "package.json"
        if manifest.exists() and json.loads(manifest.read_text()).get("name") == "@modelcontextprotocol/inspector":
            return str(json.loads(manifest.read_text())["version"])
    return "unknown"


if __name__ == "__main__":
    asyncio.run(main())
