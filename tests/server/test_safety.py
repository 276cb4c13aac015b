"""Safety properties beyond the basic flow: the deny list, the impact preview, binding and single use."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, Implementation, InputRequiredResult

from safedb.settings import Policy
from tests.helpers import Responder, audit_decisions, in_process_server, rows

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connected(path: Path, responder: Any = None, mode: str = "auto", **settings: Any) -> AsyncIterator[Client]:
    async with (
        in_process_server(path, **settings) as (server, _),
        Client(server, mode=mode, elicitation_callback=responder) as client,
    ):
        yield client


@pytest.mark.parametrize(
    "template",
    [
        "ATTACH DATABASE '{outside}' AS other",
        "ATTACH '{outside_uri}' AS other",
        "VACUUM INTO '{outside}'",
        "SELECT load_extension('{outside}')",
    ],
)
async def test_deny_list_refuses_without_asking(demo_db: Path, tmp_path: Path, template: str) -> None:
    outside = tmp_path / "elsewhere" / "copy.db"
    outside.parent.mkdir()
    query = template.format(outside=outside, outside_uri=f"file:{outside}?mode=rwc")
    responder = Responder()
    async with connected(demo_db, responder) as client:
        result = await client.call_tool("execute_query", {"query": query})
    assert result.is_error
    assert "not allowed" in result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content["status"] == "blocked"  # type: ignore[index]  # as the audit log says
    assert responder.asked == []
    assert not outside.exists()


async def test_vacuum_into_an_allowed_path_asks_and_runs_when_approved(demo_db: Path, tmp_path: Path) -> None:
    allowed = tmp_path / "backups"
    allowed.mkdir()
    target = allowed / "copy.db"
    responder = Responder()
    async with connected(demo_db, responder, policy=Policy(allowed_paths=(allowed,))) as client:
        result = await client.call_tool("execute_query", {"query": f"VACUUM INTO '{target}'"})
    assert not result.is_error, result.content
    assert len(responder.asked) == 1
    assert rows(target, "SELECT count(*) FROM invoices") == [(8,)]


@pytest.mark.parametrize(
    "template",
    [
        # SQLite ends a file name at a NUL: these URIs name {beside}, whatever follows the %00.
        "VACUUM INTO 'file:{beside}%00/../backups/copy.db'",
        "ATTACH 'file:{beside}%00/../backups/copy.db' AS other",
        # The operating system follows the link before the `..`: this names {behind_link}.
        "VACUUM INTO '{allowed}/elsewhere/../copy.db'",
    ],
)
async def test_allowed_paths_cannot_be_left_by_a_nul_or_a_link(demo_db: Path, tmp_path: Path, template: str) -> None:
    allowed = tmp_path / "backups"
    allowed.mkdir()
    beside = tmp_path / "copy.db"
    behind_link = tmp_path / "outside" / "copy.db"
    (tmp_path / "outside" / "deeper").mkdir(parents=True)
    (allowed / "elsewhere").symlink_to(tmp_path / "outside" / "deeper")
    responder = Responder()
    async with connected(demo_db, responder, policy=Policy(allowed_paths=(allowed,))) as client:
        query = template.format(beside=beside, allowed=allowed)
        result = await client.call_tool("execute_query", {"query": query})
    assert result.is_error
    assert "not allowed" in result.content[0].text  # type: ignore[union-attr]
    assert responder.asked == []
    assert not beside.exists()
    assert not behind_link.exists()
    assert list(allowed.iterdir()) == [allowed / "elsewhere"]


@pytest.mark.parametrize("name", ["file:copy.db%00", "file:%00"])
async def test_a_file_name_that_ends_at_once_is_refused_plainly(demo_db: Path, name: str) -> None:
    responder = Responder()
    async with connected(demo_db, responder) as client:
        result = await client.call_tool("execute_query", {"query": f"ATTACH '{name}' AS other"})
    assert result.is_error
    assert "not allowed" in result.content[0].text  # type: ignore[union-attr]
    assert responder.asked == []


async def test_attach_in_memory_asks(demo_db: Path) -> None:
    responder = Responder(action="decline")
    async with connected(demo_db, responder) as client:
        result = await client.call_tool("execute_query", {"query": "ATTACH ':memory:' AS scratch"})
    assert not result.is_error
    assert len(responder.asked) == 1
    assert "attach" in responder.asked[0].message


async def test_drop_table_question_states_the_rows_that_would_be_lost(demo_db: Path) -> None:
    responder = Responder(action="decline")
    async with connected(demo_db, responder) as client:
        await client.call_tool("execute_query", {"query": "DROP TABLE invoices"})
    assert "DROP TABLE invoices: 8 rows will be lost" in responder.asked[0].message
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_data_change_question_states_rows_affected_by_a_rolled_back_dry_run(demo_db: Path) -> None:
    responder = Responder(action="decline")
    async with connected(demo_db, responder) as client:
        await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE status = 'paid'"})
    assert "4 rows would be affected (delete)" in responder.asked[0].message
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE status = 'paid'") == [(4,)]


async def test_question_names_writes_made_by_triggers(demo_db: Path) -> None:
    with closing(sqlite3.connect(demo_db)) as connection, connection:
        connection.executescript(
            "CREATE TABLE removed (invoice_id INTEGER);"
            "CREATE TRIGGER keep_removed AFTER DELETE ON invoices BEGIN INSERT INTO removed VALUES (old.id); END;"
        )
    responder = Responder(action="decline")
    async with connected(demo_db, responder) as client:
        await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 1"})
    message = responder.asked[0].message
    assert "table removed" in message
    assert "via keep_removed" in message
    assert "including changes made by triggers" in message


def add_trigger(path: Path) -> None:
    connection = sqlite3.connect(path)
    with connection:
        connection.executescript(
            "CREATE TABLE shadow (invoice_id INTEGER);"
            "CREATE TRIGGER shadow_delete AFTER DELETE ON invoices BEGIN INSERT INTO shadow VALUES (old.id); END;"
        )
    connection.close()


async def test_handshake_era_approval_does_not_cover_a_changed_schema(demo_db: Path) -> None:
    """Approved, but a trigger appeared while the person was deciding: the writer refuses what was not approved."""
    responder = Responder()

    async def answer_after_schema_change(context: Any, params: Any) -> ElicitResult:
        add_trigger(demo_db)
        return await responder(context, params)

    async with connected(demo_db, answer_after_schema_change, mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 2"})
    assert result.is_error
    assert "not approved" in result.content[0].text  # type: ignore[union-attr]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 2") == [(1,)]
    assert rows(demo_db, "SELECT count(*) FROM shadow") == [(0,)]


async def test_input_required_era_asks_again_when_the_schema_changed(demo_db: Path) -> None:
    responder = Responder()
    calls = 0

    async def answer(context: Any, params: Any) -> ElicitResult:
        nonlocal calls
        calls += 1
        if calls == 1:
            add_trigger(demo_db)
        return await responder(context, params)

    async with connected(demo_db, answer) as client:
        result = await client.call_tool("execute_query", {"query": "DELETE FROM invoices WHERE id = 2"})
    assert not result.is_error, result.content
    assert len(responder.asked) == 2
    assert "table shadow" in responder.asked[1].message
    assert rows(demo_db, "SELECT invoice_id FROM shadow") == [(2,)]


def add_void_invoice(path: Path) -> None:
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("INSERT INTO invoices VALUES (9, 2, 100, 'void', '2026-11-01')")
    connection.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_approval_holds_only_for_the_rows_the_question_showed(demo_db: Path, mode: str) -> None:
    """The question showed 1 row; another void invoice arrived while the person was deciding. The approved
    statement would now delete 2: it is rolled back and the call fails, in both eras."""
    query = "DELETE FROM invoices WHERE status = 'void'"
    responder = Responder()

    async def answer_after_another_row(context: Any, params: Any) -> ElicitResult:
        add_void_invoice(demo_db)
        return await responder(context, params)

    async with (
        in_process_server(demo_db) as (server, audit),
        Client(server, mode=mode, elicitation_callback=answer_after_another_row) as client,
    ):
        result = await client.call_tool("execute_query", {"query": query})
        decisions = [decision for decision, sql in audit_decisions(audit) if sql == query]
    (question,) = responder.asked
    assert "1 row would be affected" in question.message
    assert "An approval holds for exactly 1 row" in question.message
    assert result.is_error
    assert "affected 2 rows, but was approved for the 1 row its preview showed" in result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    assert result.structured_content["status"] == "failed"
    assert rows(demo_db, "SELECT id FROM invoices WHERE status = 'void' ORDER BY id") == [(7,), (9,)]
    assert decisions == ["requested", "accepted", "failed"]


@pytest.mark.parametrize(
    ("setup", "query", "meanwhile", "shown"),
    [
        # Python's sqlite3 reports no row count for a statement that begins with WITH.
        ("", "WITH s AS (SELECT 'void') DELETE FROM invoices WHERE status IN s", "", "1 row"),
        # The trigger's rows are part of what is approved.
        (
            "CREATE TABLE siblings (invoice_id INTEGER);"
            "CREATE TRIGGER note_siblings AFTER DELETE ON invoices BEGIN "
            "INSERT INTO siblings SELECT id FROM invoices WHERE user_id = old.user_id; END;",
            "DELETE FROM invoices WHERE id = 7",
            "INSERT INTO invoices VALUES (10, 1, 500, 'paid', '2026-11-02')",
            "2 rows",
        ),
        # Rows changed through a view's INSTEAD OF trigger.
        (
            "CREATE VIEW void_invoices AS SELECT * FROM invoices WHERE status = 'void';"
            "CREATE TRIGGER void_delete INSTEAD OF DELETE ON void_invoices BEGIN "
            "DELETE FROM invoices WHERE id = old.id; END;",
            "DELETE FROM void_invoices",
            "",
            "1 row",
        ),
    ],
    ids=["with-clause", "trigger-rows", "instead-of-view"],
)
async def test_an_approval_holds_for_every_row_the_question_counted(
    demo_db: Path, setup: str, query: str, meanwhile: str, shown: str
) -> None:
    """What changes while the person decides is caught however the statement reaches its rows."""
    connection = sqlite3.connect(demo_db)
    connection.executescript(setup)
    connection.close()
    responder = Responder()

    async def answer_after_a_change(context: Any, params: Any) -> ElicitResult:
        add_void_invoice(demo_db)
        if meanwhile:
            connection = sqlite3.connect(demo_db)
            with connection:
                connection.execute(meanwhile)
            connection.close()
        return await responder(context, params)

    async with connected(demo_db, answer_after_a_change, mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": query})
    assert f"An approval holds for exactly {shown}" in responder.asked[0].message
    assert result.is_error, result.content
    assert "was approved for the " + shown in result.content[0].text  # type: ignore[union-attr]
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(2,)]


async def test_replayed_approval_runs_the_statement_once(demo_db: Path) -> None:
    """2026-07-28: sending the same accepted answer and sealed requestState twice executes once."""
    query = "INSERT INTO users (name, email, created_at) VALUES ('Replay', 'replay@example.com', '2026-01-01')"
    accept = ElicitResult(
        action="accept", content={"confirm": True, "justification": "test", "environment": "Development"}
    )
    async with (
        in_process_server(demo_db) as (server, audit),
        Client(server, mode="auto", elicitation_callback=Responder()) as client,
    ):
        first = await client.session.call_tool("execute_query", {"query": query}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert first.input_requests is not None
        (key,) = first.input_requests
        answered = await client.session.call_tool(
            "execute_query", {"query": query}, input_responses={key: accept}, request_state=first.request_state
        )
        replayed = await client.session.call_tool(
            "execute_query", {"query": query}, input_responses={key: accept}, request_state=first.request_state
        )
        decisions = [decision for decision, sql in audit_decisions(audit) if sql == query]
    assert not answered.is_error, answered.content
    assert replayed.is_error
    assert "already answered" in replayed.content[0].text  # type: ignore[union-attr]
    assert decisions == ["requested", "accepted", "executed", "refused"]
    assert rows(demo_db, "SELECT count(*) FROM users WHERE name = 'Replay'") == [(1,)]


async def test_an_answer_cannot_be_moved_to_another_statement(demo_db: Path) -> None:
    """The SDK binds requestState to the call's arguments; SafeDB's ticket binds it to the statement too."""
    accept = ElicitResult(
        action="accept", content={"confirm": True, "justification": "test", "environment": "Development"}
    )
    async with connected(demo_db, Responder()) as client:
        asked = await client.session.call_tool(
            "execute_query", {"query": "DELETE FROM invoices WHERE id = 5"}, allow_input_required=True
        )
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key,) = asked.input_requests
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "execute_query",
                {"query": "DELETE FROM invoices"},
                input_responses={key: accept},
                request_state=asked.request_state,
                allow_input_required=True,
            )
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_unanswered_question_times_out_as_cancelled_with_progress_meanwhile(demo_db: Path) -> None:
    responder = Responder()
    progress: list[float] = []

    async def slow_person(context: Any, params: Any) -> ElicitResult:
        await anyio.sleep(30)
        return await responder(context, params)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    policy = Policy(approval_timeout=1.5)
    async with connected(demo_db, slow_person, mode="legacy", policy=policy, progress_interval=0.2) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "execute_query", {"query": "DELETE FROM invoices"}, progress_callback=on_progress
            )
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert "cancelled" in result.content[0].text  # type: ignore[union-attr]
    assert len(progress) >= 3
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_unanswered_question_times_out_and_the_client_is_told_to_stop_asking(demo_db: Path) -> None:
    stopped_asking = anyio.Event()

    async def absent_person(context: Any, params: Any) -> ElicitResult:
        try:
            await anyio.sleep(30)
        finally:
            stopped_asking.set()
        return ElicitResult(
            action="accept", content={"confirm": True, "justification": "late", "environment": "Development"}
        )

    async with connected(demo_db, absent_person, mode="legacy", policy=Policy(approval_timeout=0.5)) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("execute_query", {"query": "DELETE FROM invoices"})
            await stopped_asking.wait()
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_input_required_answer_after_the_timeout_does_not_run(demo_db: Path) -> None:
    accept = ElicitResult(
        action="accept", content={"confirm": True, "justification": "test", "environment": "Development"}
    )
    async with connected(demo_db, Responder(), policy=Policy(approval_timeout=1)) as client:
        asked = await client.session.call_tool(
            "execute_query", {"query": "DELETE FROM invoices"}, allow_input_required=True
        )
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key,) = asked.input_requests
        await anyio.sleep(1.2)
        late = await client.session.call_tool(
            "execute_query", {"query": "DELETE FROM invoices"}, input_responses={key: accept},
            request_state=asked.request_state,
        )  # fmt: skip
    assert late.structured_content is not None
    assert late.structured_content["status"] == "timed_out"
    assert rows(demo_db, "SELECT count(*) FROM invoices") == [(8,)]


async def test_an_answer_from_another_client_is_a_new_question(demo_db: Path) -> None:
    """The ticket binds the question to the client it was put to: another client's answer does not count."""
    accept = ElicitResult(
        action="accept", content={"confirm": True, "justification": "test", "environment": "Development"}
    )
    async with in_process_server(demo_db) as (server, _):
        async with Client(server, elicitation_callback=Responder()) as asker:
            asked = await asker.session.call_tool(
                "execute_query", {"query": "DELETE FROM invoices WHERE id = 7"}, allow_input_required=True
            )
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        (key,) = asked.input_requests
        other = Implementation(name="someone-else", version="9.9")
        async with Client(server, elicitation_callback=Responder(), client_info=other) as intruder:
            answered = await intruder.session.call_tool(
                "execute_query", {"query": "DELETE FROM invoices WHERE id = 7"}, input_responses={key: accept},
                request_state=asked.request_state, allow_input_required=True,
            )  # fmt: skip
    assert isinstance(answered, InputRequiredResult)
    assert rows(demo_db, "SELECT count(*) FROM invoices WHERE id = 7") == [(1,)]
