"""`safedb demo`: the tutorial's scenario. A safe query returns at once; `DROP TABLE invoices` asks first."""

from __future__ import annotations

import sys
from collections.abc import Callable

from safedb.client.session import CommandRunner
from safedb.client.targets import StdioTarget

SAFE_QUERY = "SELECT id, user_id, amount_cents, status FROM invoices ORDER BY id"
DESTRUCTIVE_QUERY = "DROP TABLE invoices"


def demo_server(data_dir: str | None) -> StdioTarget:
    """A SafeDB server on the demo database, started by the client over stdio."""
    args = ["-m", "safedb", "serve", "--transport", "stdio", "--log-level", "warning"]
    if data_dir is not None:
        args += ["--data-dir", data_dir]
    return StdioTarget(sys.executable, tuple(args))


async def run_demo(runner: CommandRunner, say: Callable[[str], None], no_invoices: str) -> bool:
    """Run the two steps; True when both calls returned without a tool error. `no_invoices` says why the demo's table
    may be missing (an earlier run's DROP TABLE approved; on a server of the user's, another database) and what to
    do."""
    server = runner.connection.server
    say(f"SafeDB demo against {server.describe()}\n")
    listed = await runner.connection.call_tool("list_tables", {})
    if not listed.is_error and "invoices" not in _names(listed.structured_content):
        say(f"The demo's table invoices is not there: {no_invoices}")
        return False
    say(f"Step 1: a read-only query runs at once, without asking.\n  {SAFE_QUERY}\n")
    first = await runner.call("execute_query", [f"query={SAFE_QUERY}"])
    if not first.ok:  # not the demo database, or not its only target: step 2 would fail too, or drop another table
        say("\nThe demo stops here: it needs a SafeDB server whose only target is the demo database.")
        return False
    say(f"\nStep 2: a statement that changes the database asks you first.\n  {DESTRUCTIVE_QUERY}\n")
    second = await runner.call("execute_query", [f"query={DESTRUCTIVE_QUERY}"])
    say("\nThat is the whole idea: reads run, changes wait for a person.")
    return first.ok and second.ok


def _names(structured: object) -> list[str]:
    """The table names a `list_tables` result holds (SafeDB's: `{"tables": [{"name": ..., "type": ...}]}`)."""
    tables = structured.get("tables") if isinstance(structured, dict) else None
    if not isinstance(tables, list):
        return ["invoices"]  # another server's answer: the demo's own steps will say what they find
    return [str(table.get("name")) for table in tables if isinstance(table, dict)]
