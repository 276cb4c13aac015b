"""Target policies: refused kinds, kinds that need no approval, production targets, typing the name back,
and several targets behind one server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client

from safedb.db.demo import ensure_demo_database
from safedb.settings import Environment, Policy, Target
from safedb.sql.classification import ChangeCategory
from tests.helpers import Responder, audit_decisions, in_process_server, rows, serving_process

pytestmark = pytest.mark.anyio

PRODUCTION_ANSWER = {
    "confirm": True,
    "justification": "ticket OPS-1234: remove test invoice",
    "environment": "Production",
}


async def call(path: Path, query: str, responder: Any, target: Target) -> tuple[Any, list[tuple[str, str]]]:
    async with in_process_server(path, policy=target.policy, environment=target.environment) as (server, audit):
        async with Client(server, elicitation_callback=responder) as client:
            result = await client.call_tool("execute_query", {"query": query})
        return result, audit_decisions(audit)


async def test_refused_kind_is_blocked_without_asking(demo_db: Path) -> None:
    responder = Responder()
    policy = Policy(refuse=frozenset({ChangeCategory.SCHEMA}))
    result, decisions = await call(demo_db, "DROP TABLE invoices", responder, Target(policy=policy))
    assert result.is_error
    assert "refuses schema change outright" in result.content[0].text
    assert result.structured_content["status"] == "blocked"  # as the audit log says
    assert responder.asked == []
    assert decisions == [("blocked", "DROP TABLE invoices")]
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_kind_outside_ask_runs_without_asking_and_is_recorded(demo_db: Path) -> None:
    responder = Responder()
    policy = Policy(ask=frozenset({ChangeCategory.SCHEMA}))
    query = "UPDATE invoices SET status = 'void' WHERE id = 2"
    result, decisions = await call(demo_db, query, responder, Target(policy=policy))
    assert not result.is_error, result.content
    assert responder.asked == []
    assert decisions == [("accepted", query), ("executed", query)]
    assert rows(demo_db, "SELECT status FROM invoices WHERE id = 2") == [("void",)]


@pytest.mark.parametrize(
    ("answer", "runs"),
    [
        ({"confirm": True, "justification": "cleanup of a test invoice", "environment": "Development"}, False),
        (PRODUCTION_ANSWER, True),
    ],
    ids=["answer-says-development", "answer-says-production"],
)
async def test_production_target_needs_a_production_answer(demo_db: Path, answer: dict[str, Any], runs: bool) -> None:
    target = Target(environment=Environment.PRODUCTION)
    result, _ = await call(demo_db, "DELETE FROM invoices WHERE id = 3", Responder(content=answer), target)
    assert result.is_error is not runs
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 3") == [(0,) if runs else (1,)]


@pytest.mark.parametrize(("typed", "runs"), [("test", True), ("prod", False)])
async def test_typing_the_target_name_back(demo_db: Path, typed: str, runs: bool) -> None:
    responder = Responder(content={**PRODUCTION_ANSWER, "target_name": typed})
    target = Target(policy=Policy(type_target_name=True))
    result, _ = await call(demo_db, "DELETE FROM invoices WHERE id = 6", responder, target)
    assert "target_name" in responder.asked[0].requested_schema["properties"]  # type: ignore[union-attr]
    assert "target_name" in responder.asked[0].requested_schema["required"]  # type: ignore[union-attr]
    assert result.is_error is not runs
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 6") == [(0,) if runs else (1,)]


async def test_a_target_name_typed_back_is_held_to_the_longest_name(demo_db: Path) -> None:
    """A wrong name typed back is quoted in the blocked reason kept in the audit log: 3.9 MB of it were."""
    responder = Responder(content={**PRODUCTION_ANSWER, "target_name": "x" * 100_000})
    target = Target(policy=Policy(type_target_name=True))
    result, decisions = await call(demo_db, "DELETE FROM invoices WHERE id = 6", responder, target)
    schema = responder.asked[0].requested_schema  # type: ignore[union-attr]
    assert schema["properties"]["target_name"]["maxLength"] == 64
    assert result.structured_content is not None
    assert result.structured_content["status"] == "invalid"
    assert "x" * 100 not in str(decisions)
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 6") == [(1,)]


CONFIG = """
[targets.dev]
database = "dev/demo.db"

[targets.prod]
database = "prod/demo.db"
environment = "production"

[targets.prod.policy]
refuse = ["schema", "extension"]
"""


async def test_config_file_serves_several_targets(tmp_path: Path) -> None:
    dev, prod = ensure_demo_database(tmp_path / "dev"), ensure_demo_database(tmp_path / "prod")
    (tmp_path / "safedb.toml").write_text(CONFIG, encoding="utf-8")
    command = [sys.executable, "-m", "safedb", "serve", "--config", str(tmp_path / "safedb.toml"), "--port", "0"]
    responder = Responder(content=PRODUCTION_ANSWER)
    with serving_process(command, env={"SAFEDB_DATA_DIR": str(tmp_path / "data")}) as server:
        log = "".join(server.log)
        async with Client(server.url, elicitation_callback=responder) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            unnamed = await client.call_tool("execute_query", {"query": "SELECT 1"})
            dropped = await client.call_tool("execute_query", {"query": "DROP TABLE users", "target": "prod"})
            deleted = await client.call_tool(
                "execute_query", {"query": "DELETE FROM invoices WHERE id = 1", "target": "prod"}
            )
            other = await client.call_tool("execute_query", {"query": "DROP TABLE invoices", "target": "dev"})
            unknown = await client.call_tool("list_tables", {"target": "staging"})
    assert "target dev (development): asks at the client before:" in log
    assert "target prod (production):" in log
    assert "refused: extension loading, schema change" in log
    assert "prod (production)" in (tools["execute_query"].description or "")
    assert "target" in tools["execute_query"].input_schema["properties"]
    assert unnamed.is_error
    assert "Name a target" in unnamed.content[0].text  # type: ignore[union-attr]
    assert dropped.is_error
    assert "refuses schema change" in dropped.content[0].text  # type: ignore[union-attr]
    assert not deleted.is_error, deleted.content
    assert not other.is_error, other.content
    assert unknown.is_error
    assert "no target named 'staging'" in unknown.content[0].text  # type: ignore[union-attr]
    assert rows(prod, "SELECT count(*) FROM invoices WHERE id = 1") == [(0,)]
    assert rows(prod, "SELECT count(*) FROM users") == [(5,)]
    assert rows(dev, "SELECT count(*) FROM sqlite_schema WHERE name = 'invoices'") == [(0,)]


def test_target_options_cannot_be_combined_with_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "safedb.toml").write_text(CONFIG, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", "--config", str(tmp_path / "safedb.toml"), "--database", "x.db"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "--database (SAFEDB_DATABASE) cannot be combined with --config" in result.stderr


@pytest.mark.parametrize(
    ("args", "environment"),
    [(["--allow-path", "backups"], {}), ([], {"SAFEDB_ALLOWED_PATHS": "backups"})],
    ids=["option", "environment"],
)
def test_the_refusal_names_the_option_as_it_is_spelled(
    tmp_path: Path, args: list[str], environment: dict[str, str]
) -> None:
    """The refusal named `--allowed-paths`, an option that does not exist (the parameter's name, not its flag)."""
    (tmp_path / "safedb.toml").write_text(CONFIG, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "safedb", "serve", "--config", str(tmp_path / "safedb.toml"), *args],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **environment},
    )  # fmt: skip
    assert result.returncode == 1
    assert (
        "--allow-path (SAFEDB_ALLOWED_PATHS) cannot be combined with --config: set targets.NAME.policy.allowed_paths "
        "in the configuration file instead." in result.stderr
    )
    assert "Traceback" not in result.stderr
