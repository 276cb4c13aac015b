"""Property: whatever the statement, a declined or cancelled question leaves the database as it was, and a
statement SQLite's authorizer says would write is always asked about (or refused) first."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer

from safedb.audit import SqliteAuditStore
from safedb.db.demo import ensure_demo_database
from safedb.db.sqlite import SqliteDatabase
from safedb.server.app import build_server
from safedb.settings import Settings
from tests.helpers import Responder, database_snapshot

# Authorizer actions that write: everything except READ (20), SELECT (21), FUNCTION (31), RECURSIVE (33),
# and PRAGMA (19), which writes only when given a value.
_READ_ACTIONS = {20, 21, 31, 33}

tables = st.sampled_from(["users", "invoices"])
numbers = st.integers(min_value=-5, max_value=20)


def _statement_bodies() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds("DELETE FROM {} WHERE id = {}".format, tables, numbers),
        st.builds("DELETE FROM {}".format, tables),
        st.builds("UPDATE {} SET id = id + {} WHERE id > {}".format, tables, numbers, numbers),
        st.builds("WITH c AS (SELECT {1} AS n) DELETE FROM {0} WHERE id IN (SELECT n FROM c)".format, tables, numbers),
        st.builds(
            "INSERT INTO users (name, email, created_at) VALUES ('p{0}', 'p{0}@example.com', '2026-01-01')".format,
            numbers,
        ),
        st.builds("INSERT OR REPLACE INTO invoices SELECT * FROM invoices WHERE id = {}".format, numbers),
        st.builds("REPLACE INTO users SELECT * FROM users WHERE id = {}".format, numbers),
        st.builds("DROP TABLE {}".format, tables),
        st.builds("DROP TABLE IF EXISTS {}".format, tables),
        st.builds("CREATE TABLE extra_{} (a, b)".format, st.integers(0, 9)),
        st.builds("CREATE INDEX idx_{0} ON {1}(id)".format, st.integers(0, 9), tables),
        st.builds("CREATE VIEW v_{0} AS SELECT * FROM {1}".format, st.integers(0, 9), tables),
        st.builds("ALTER TABLE {} ADD COLUMN extra TEXT".format, tables),
        st.builds("ALTER TABLE {} RENAME TO renamed".format, tables),
        st.builds("PRAGMA user_version = {}".format, numbers),
        st.builds("PRAGMA application_id = {}".format, numbers),
        st.sampled_from(["VACUUM", "REINDEX", "ANALYZE", "PRAGMA journal_mode = WAL", "PRAGMA journal_mode"]),
        st.builds("SELECT * FROM {} WHERE id = {}".format, tables, numbers),
        st.builds("SELECT 'DELETE FROM {}' AS text".format, tables),
        st.builds(
            "CREATE TRIGGER trg_{0} AFTER INSERT ON {1} BEGIN DELETE FROM {1}; END".format, st.integers(0, 9), tables
        ),
    )


def _randomly_cased(text: str, flips: list[bool]) -> str:
    return "".join(ch.swapcase() if flip else ch for ch, flip in zip(text, flips + [False] * len(text), strict=False))


@st.composite
def statements(draw: st.DrawFn) -> str:
    body = draw(_statement_bodies())
    if draw(st.booleans()):
        body = _randomly_cased(body, draw(st.lists(st.booleans(), max_size=len(body))))
        body = body.replace("'P", "'p")
    prefix = draw(st.sampled_from(["", "  ", "-- note\n", "/* DROP TABLE users */ ", "\n\t"]))
    suffix = draw(st.sampled_from(["", ";", " ;  ", " -- trailing", "/* x */"]))
    return prefix + body + suffix


def authorizer_reports_a_write(path: Path, sql: str) -> bool | None:
    """An independent look with SQLite's authorizer; None when SQLite cannot compile the statement."""
    events: list[tuple[int, str | None, str | None]] = []

    def record(code: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        events.append((code, arg1, arg2))
        return sqlite3.SQLITE_DENY if code == 19 and arg2 is not None else sqlite3.SQLITE_OK

    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        connection.set_authorizer(record)
        connection.execute(f"EXPLAIN {sql}").fetchall()
    except sqlite3.DatabaseError:
        if not any(code == 19 and arg2 is not None for code, _, arg2 in events):
            return None
    finally:
        connection.close()
    return any(code not in _READ_ACTIONS and not (code == 19 and arg2 is None) for code, _, arg2 in events)


@pytest.fixture(scope="module")
def property_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, MCPServer]]:
    path = ensure_demo_database(tmp_path_factory.mktemp("property"))
    settings = Settings()
    database = SqliteDatabase(path, settings.limits)
    audit = SqliteAuditStore.open(path.parent / "audit.db")
    yield path, build_server(settings, {"default": database}, audit)
    anyio.run(database.aclose)
    audit.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("answer", ["decline", "cancel"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=statements())
def test_no_write_without_an_accepted_answer(
    property_db: tuple[Path, MCPServer], mode: str, answer: str, sql: str
) -> None:
    path, server = property_db
    before = database_snapshot(path)
    writes = authorizer_reports_a_write(path, sql)
    responder = Responder(action=answer)

    async def call() -> None:
        async with Client(server, mode=mode, elicitation_callback=responder) as client:
            result = await client.call_tool("execute_query", {"query": sql})
        if writes:
            assert responder.asked or result.is_error, f"{sql!r} wrote without asking"
            assert result.structured_content is not None
            assert result.structured_content["executed"] is False

    anyio.run(call)
    assert database_snapshot(path) == before, sql
