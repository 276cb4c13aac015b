"""`safedb serve` on SQLite, the database file changing while the person decides, both protocol eras.

Another process changes the schema between the question and the answer. The approved run must do what the
question showed (same tables, same kinds of change, the row count shown) or stop with nothing changed, and the
audit log must say how it ended. Each test checks the tool result, the database and the audit log.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult

from safedb.audit import AuditQuery, open_audit_store
from tests.helpers import Responder, rows, safedb_serve

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]

SETUP = """
CREATE TABLE ledger (id INTEGER PRIMARY KEY, status TEXT, amount INTEGER NOT NULL DEFAULT 0);
INSERT INTO ledger VALUES (1, 'void', 10), (2, 'paid', 20), (3, 'paid', 30);
CREATE TABLE side (note TEXT);
"""

# Run by another process: a script given on the command line, against the database file.
OTHER_PROCESS = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()"


def decisions(path: Path, sql: str) -> list[str]:
    with open_audit_store(str(path.parent / "audit.db"), readonly=True) as store:
        return [str(r.decision) for r in store.records(AuditQuery(limit=None)) if r.sql == sql]


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


class ChangingResponder(Responder):
    """Accepts the first question after another process ran `script` on the database (someone else, while the
    person decides); declines any later one (on 2026-07-28 a changed classification is a new question)."""

    def __init__(self, path: Path, script: str) -> None:
        super().__init__()
        self.path = path
        self.script = script

    async def __call__(self, context: Any, params: Any) -> Any:
        if self.asked:
            self.asked.append(params)
            return ElicitResult(action="decline")
        await anyio.run_process([sys.executable, "-c", OTHER_PROCESS, str(self.path), self.script])
        return await super().__call__(context, params)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    connection = sqlite3.connect(path)
    connection.executescript(SETUP)
    connection.close()
    return path


async def ask_while_changing(path: Path, mode: str, sql: str, script: str) -> tuple[Any, ChangingResponder]:
    responder = ChangingResponder(path, script)
    with safedb_serve(path) as server:
        async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
            result = await client.call_tool("execute_query", {"query": sql})
    return result, responder


def assert_stopped_or_asked_anew(result: Any, responder: ChangingResponder, path: Path, sql: str) -> None:
    """The approved run was stopped, saying why; or (2026-07-28, where the retry classifies the statement again)
    the statement now classifies differently, so the person was asked anew, and declined."""
    if len(responder.asked) == 1:
        assert result.is_error, text(result)
        assert "Nothing was changed" in text(result) or "nothing was changed" in text(result)
        assert "Traceback" not in text(result)
        assert decisions(path, sql) == ["requested", "accepted", "failed"]
    else:
        assert "declined" in text(result)
        assert decisions(path, sql) == ["requested", "requested", "declined"]


# A trigger added on the target table: each would run code the question never showed.
TRIGGERS = {
    # Writes elsewhere.
    "after-writes-elsewhere": (
        "DELETE FROM ledger WHERE id = 1",
        "CREATE TRIGGER ledger_note AFTER DELETE ON ledger BEGIN INSERT INTO side VALUES ('ran unseen'); END;",
    ),
    # Skips every row: the count differs.
    "before-ignores-all": (
        "DELETE FROM ledger WHERE id = 1",
        "CREATE TRIGGER ledger_keep BEFORE DELETE ON ledger BEGIN SELECT RAISE(IGNORE); END;",
    ),
    # Skips the row the question counted while another comes to match: the count holds, another row goes.
    "before-ignores-the-shown-row": (
        "DELETE FROM ledger WHERE status = 'void'",
        "INSERT INTO ledger VALUES (9, 'void', 90);"
        "CREATE TRIGGER ledger_keep BEFORE DELETE ON ledger WHEN old.id = 1 BEGIN SELECT RAISE(IGNORE); END;",
    ),
    # Changes more rows of the same table: same table, same kind, but through unseen code.
    "after-updates-the-same-table": (
        "UPDATE ledger SET amount = 11 WHERE id = 1",
        "CREATE TRIGGER ledger_zero AFTER UPDATE ON ledger BEGIN UPDATE ledger SET amount = 0 WHERE id = 3; END;",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(TRIGGERS))
async def test_a_trigger_added_while_deciding_does_not_run(database: Path, mode: str, case: str) -> None:
    sql, script = TRIGGERS[case]
    before = rows(database, "SELECT * FROM ledger WHERE id <> 9 ORDER BY id")

    result, responder = await ask_while_changing(database, mode, sql, script)

    assert "An approval holds for exactly 1 row" in responder.asked[0].message
    assert rows(database, "SELECT * FROM ledger WHERE id <> 9 ORDER BY id") == before
    if "INSERT INTO ledger VALUES (9" in script:  # the row that came to match was not shown: it stays
        assert rows(database, "SELECT count(*) FROM ledger WHERE id = 9") == [(1,)]
    assert rows(database, "SELECT count(*) FROM side") == [(0,)]
    assert_stopped_or_asked_anew(result, responder, database, sql)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("body", ["INSERT INTO side VALUES ('ran unseen')", "SELECT 1"])
async def test_a_table_swapped_for_a_view_while_deciding_is_not_written_through(
    database: Path, mode: str, body: str
) -> None:
    sql = "DELETE FROM ledger WHERE id = 1"
    script = (
        "ALTER TABLE ledger RENAME TO ledger_old; CREATE VIEW ledger AS SELECT * FROM ledger_old;"
        f"CREATE TRIGGER ledger_instead INSTEAD OF DELETE ON ledger BEGIN {body}; END;"
    )

    result, responder = await ask_while_changing(database, mode, sql, script)

    assert rows(database, "SELECT id FROM ledger_old ORDER BY id") == [(1,), (2,), (3,)]
    assert rows(database, "SELECT count(*) FROM side") == [(0,)]
    assert_stopped_or_asked_anew(result, responder, database, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM ledger WHERE id = 1",
        # SQLite names a WITH query as the code its reads are made in, as it names a trigger or view.
        "WITH doomed AS (SELECT id FROM ledger WHERE id = 1) DELETE FROM ledger WHERE id IN (SELECT id FROM doomed)",
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1) DELETE FROM ledger WHERE id IN n",
    ],
)
async def test_the_question_names_the_triggers_the_statement_runs(database: Path, sql: str) -> None:
    """Even a trigger that writes nothing is part of what is approved, so the person sees it; WITH queries are no
    triggers or views, and their reads still run when approved."""
    connection = sqlite3.connect(database)
    connection.executescript(
        "CREATE TRIGGER ledger_guard BEFORE DELETE ON ledger WHEN old.amount > 1000 BEGIN SELECT RAISE(IGNORE); END;"
    )
    connection.close()
    responder = Responder()
    with safedb_serve(database) as server:
        async with Client(server.url, mode="legacy", elicitation_callback=responder) as client:
            result = await client.call_tool("execute_query", {"query": sql})
    assert not result.is_error, text(result)
    assert "Runs the code of (triggers, views): ledger_guard\n" in responder.asked[0].message
    assert rows(database, "SELECT id FROM ledger ORDER BY id") == [(2,), (3,)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_table_of_the_same_name_in_an_attached_database_is_not_the_one_changed(
    database: Path, mode: str
) -> None:
    """An approved ATTACH stays on the writer connection it ran on. The question counted main's row; main's table
    is then dropped, so the name would reach the attached database's table of the same name."""
    other = database.parent / "other.db"
    connection = sqlite3.connect(other)
    connection.executescript("CREATE TABLE ledger (id INTEGER PRIMARY KEY); INSERT INTO ledger VALUES (1), (5);")
    connection.close()
    sql = "DELETE FROM ledger WHERE id = 1"
    responder = Responder()

    async def answer(context: Any, params: Any) -> ElicitResult:
        if sql in params.message and not any(sql in asked.message for asked in responder.asked):
            script = "DROP TABLE ledger;"
            await anyio.run_process([sys.executable, "-c", OTHER_PROCESS, str(database), script])
        return await responder(context, params)

    with safedb_serve(database, "--allow-path", str(database.parent)) as server:
        async with Client(server.url, mode=mode, elicitation_callback=answer) as client:
            attached = await client.call_tool("execute_query", {"query": f"ATTACH '{other}' AS aux"})
            assert not attached.is_error, text(attached)
            result = await client.call_tool("execute_query", {"query": sql})

    # Stopped (main's table the question was about is gone), or, on 2026-07-28, the retry no longer compiles.
    assert result.is_error, text(result)
    assert "main.ledger now means no table" in text(result) or "no such table: ledger" in text(result), text(result)
    assert rows(other, "SELECT id FROM ledger ORDER BY id") == [(1,), (5,)]
    assert decisions(database, sql)[-1] in ("failed", "refused")


@pytest.mark.parametrize("mode", MODES)
async def test_a_cascading_foreign_key_added_while_deciding_deletes_nothing_else(database: Path, mode: str) -> None:
    """SafeDB's writers leave `foreign_keys` off (SQLite's default), so a cascade added meanwhile does not run:
    the approved delete changes the one row shown and nothing in the other table."""
    sql = "DELETE FROM ledger WHERE id = 1"
    script = (
        "CREATE TABLE entries (id INTEGER PRIMARY KEY, ledger_id INTEGER REFERENCES ledger(id) ON DELETE CASCADE);"
        "INSERT INTO entries VALUES (1, 1), (2, 1), (3, 2);"
    )

    result, responder = await ask_while_changing(database, mode, sql, script)

    assert not result.is_error, text(result)
    assert len(responder.asked) == 1
    assert rows(database, "SELECT id FROM ledger ORDER BY id") == [(2,), (3,)]
    assert rows(database, "SELECT id FROM entries ORDER BY id") == [(1,), (2,), (3,)]
    assert decisions(database, sql) == ["requested", "accepted", "executed"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_table_rebuilt_under_its_name_while_deciding_is_not_changed(database: Path, mode: str) -> None:
    """A default, a CHECK, a generated column and an index expression added meanwhile, the way SQLite alters a table
    (a new one, the rows copied, renamed over the old one): SQLite's functions cannot write, and the approved
    insert added the one row shown. The new table is another table all the same, whose rows nobody was asked about
    (docs/safety.md, section 5): the insert is stopped, or asked about anew."""
    sql = "INSERT INTO ledger (id, status) VALUES (4, 'new')"
    script = (
        "CREATE TABLE ledger_new (id INTEGER PRIMARY KEY, status TEXT CHECK (length(status) < 100), "
        "amount INTEGER NOT NULL DEFAULT (abs(random()) % 7), loud TEXT GENERATED ALWAYS AS (upper(status)));"
        "INSERT INTO ledger_new (id, status, amount) SELECT id, status, amount FROM ledger;"
        "DROP TABLE ledger; ALTER TABLE ledger_new RENAME TO ledger;"
        "CREATE INDEX ledger_lower ON ledger (lower(status));"
    )

    result, responder = await ask_while_changing(database, mode, sql, script)

    assert_stopped_or_asked_anew(result, responder, database, sql)
    assert rows(database, "SELECT id, loud FROM ledger ORDER BY id") == [(1, "VOID"), (2, "PAID"), (3, "PAID")]
    assert rows(database, "SELECT count(*) FROM side") == [(0,)]
