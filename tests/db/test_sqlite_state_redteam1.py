"""Red team: what an approved change leaves behind on SafeDB's pooled SQLite connections.

A pragma that sets how one connection behaves (`ignore_check_constraints`, `foreign_keys`,
`reverse_unordered_selects`...) runs, once approved, on the worker thread's writer and holds there only. Dry runs
of short statements ran on the event loop's writer, without it, and so did approved changes while changes had been
quick; an approved change that failed there ran again on the worker thread's writer. So:

- after `PRAGMA ignore_check_constraints = 1`, a question said the dry run of an UPDATE did not finish (its CHECK
  constraint failed), and the approved UPDATE, failing on the event loop's writer, ran again on the other writer,
  where it wrote the value the constraint forbids;
- after `PRAGMA foreign_keys = ON`, an approved INSERT of a row whose parent does not exist ran on the event loop's
  writer, which enforces no foreign keys: it was written, where the writer the pragma ran on refuses it;
- after `PRAGMA reverse_unordered_selects = ON`, an approved `DELETE ... WHERE id IN (SELECT id ... LIMIT 1)` whose
  dry run deleted one row deleted another, once it ran on the other writer.

Now, once a change that may set how its connection behaves has been approved, every later dry run and approved
change runs on that same writer, so that what the question shows is what runs.

Besides (see each test): a database attached on the writer lent main's tables the names of its virtual tables'
storage, and a dry run stopped by the event loop's smaller value limit left a DELETE without a count to hold to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client.client import Client

from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import QueryFailed
from tests.db.conftest import served_script
from tests.helpers import Responder, in_process_server, rows, watching_the_loop_while_locked

pytestmark = pytest.mark.anyio

SCHEMA = """
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY,
    up INTEGER REFERENCES nodes (id),
    label TEXT CHECK (label <> 'forbidden')
);
INSERT INTO nodes VALUES (1, NULL, 'a'), (2, 1, 'b'), (3, 2, 'c'), (4, 3, 'd');
"""


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "state.db"
    async with served_script(path, SCHEMA) as served:
        yield served, path


async def _approve(served: SqliteDatabase, sql: str) -> None:
    classification = await served.classify(sql)
    await served.preview(classification)
    await served.write(classification)


async def test_a_check_the_dry_run_failed_on_is_skipped_only_where_the_question_said_so(
    database: tuple[SqliteDatabase, Path],
) -> None:
    served, path = database
    await _approve(served, "PRAGMA ignore_check_constraints = 1")

    classification = await served.classify("UPDATE nodes SET label = 'forbidden' WHERE id = 4")
    impact = await served.preview(classification)
    outcome = await served.write(classification, impact.bounds)

    # The question shows what runs: the dry run skipped the check, as the approved run does.
    assert impact.rows_affected == 1, impact.lines
    assert outcome.rows_affected == 1
    assert rows(path, "SELECT label FROM nodes WHERE id = 4") == [("forbidden",)]


async def test_an_approved_insert_runs_with_the_foreign_keys_that_were_approved(
    database: tuple[SqliteDatabase, Path],
) -> None:
    served, path = database
    await _approve(served, "PRAGMA foreign_keys = ON")

    classification = await served.classify("INSERT INTO nodes VALUES (5, 99, 'e')")
    impact = await served.preview(classification)

    assert "FOREIGN KEY constraint failed" in " ".join(impact.lines)
    with pytest.raises(QueryFailed, match="FOREIGN KEY constraint failed"):
        await served.write(classification, impact.bounds)
    assert rows(path, "SELECT count(*) FROM nodes") == [(4,)]


async def test_the_rows_the_dry_run_counted_are_the_rows_the_approved_run_deletes(
    database: tuple[SqliteDatabase, Path],
) -> None:
    served, path = database
    await _approve(served, "PRAGMA reverse_unordered_selects = ON")

    # In the table's order, the first row is 1, which the condition leaves; in reverse, 4.
    classification = await served.classify("DELETE FROM nodes WHERE id IN (SELECT id FROM nodes LIMIT 1) AND id > 1")
    impact = await served.preview(classification)

    # Another connection's lock stops the change on the event loop's writer: it runs on the worker thread's.
    outcome, _ = await watching_the_loop_while_locked(
        path, ["BEGIN IMMEDIATE"], lambda: served.write(classification, impact.bounds)
    )

    assert impact.rows_affected == outcome.rows_affected == 1, impact.lines
    assert rows(path, "SELECT id FROM nodes ORDER BY id") == [(1,), (2,), (3,)]


CASCADE_SCHEMA = """
CREATE TABLE owners (id INTEGER PRIMARY KEY);
INSERT INTO owners VALUES (1), (2);
CREATE TABLE notes_data (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES owners (id) ON DELETE CASCADE);
INSERT INTO notes_data VALUES (1, 1), (2, 1), (3, 2);
"""


async def test_a_database_attached_on_the_writer_lends_no_table_of_main_to_a_module(tmp_path: Path) -> None:
    """A database attached on the writer whose FTS5 table `notes` keeps `notes_data` made main's own `notes_data`
    look like the module's storage to the approved statement's authorizer, which let through what a module does
    to its storage: with foreign keys on, `DELETE FROM owners` deleted main's `notes_data` rows by cascade, where a
    child table of any other name is refused (the question names only `owners`)."""
    other = tmp_path / "other.db"
    async with served_script(other, "CREATE VIRTUAL TABLE notes USING fts5(body);"):
        pass
    path = tmp_path / "cascade.db"
    async with served_script(path, CASCADE_SCHEMA) as served:
        await _approve(served, f"ATTACH '{other}' AS other")
        await _approve(served, "PRAGMA foreign_keys = ON")

        classification = await served.classify("DELETE FROM owners WHERE id = 1")
        assert [str(change.target) for change in classification.changes] == ["table owners"]
        impact = await served.preview(classification)
        with pytest.raises(QueryFailed, match="not approved"):
            await served.write(classification, impact.bounds)

    assert rows(path, "SELECT count(*) FROM owners") == [(2,)]
    assert rows(path, "SELECT count(*) FROM notes_data") == [(3,)]


async def test_a_dry_run_stopped_by_the_event_loops_value_limit_is_measured_where_the_change_runs(
    database: tuple[SqliteDatabase, Path],
) -> None:
    """The event loop's writer builds no value past 1 MB (`MAX_VALUE_BYTES_ON_EVENT_LOOP`), the worker thread's up to
    64 MB. A short DELETE building a 2 MB string with bounded functions only was dry-run on the event loop's writer,
    where it failed: the question said the dry run did not finish, with no count to hold the change to. Approved, it
    failed there too and ran again on the worker thread's writer, where it deleted every row."""
    served, path = database
    sql = (
        "DELETE FROM nodes WHERE id > 0 OR id IN (WITH RECURSIVE r(s) AS (SELECT 'ab' UNION ALL SELECT s || s FROM r "
        "WHERE length(s) < 2000000) SELECT length(s) FROM r)"
    )
    classification = await served.classify(sql)
    impact = await served.preview(classification)

    assert impact.rows_affected == 4, impact.lines
    outcome = await served.write(classification, impact.bounds)
    assert outcome.rows_affected == 4
    assert rows(path, "SELECT count(*) FROM nodes") == [(0,)]


async def test_through_the_server_the_question_after_an_approved_pragma_shows_what_runs(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    async with served_script(path, SCHEMA):
        pass
    responder = Responder()
    async with in_process_server(path) as (server, _), Client(server, elicitation_callback=responder) as client:
        result = await client.call_tool("execute_query", {"query": "PRAGMA ignore_check_constraints = 1"})
        assert not result.is_error
        result = await client.call_tool("execute_query", {"query": "UPDATE nodes SET label = 'forbidden' WHERE id = 4"})

    question = responder.asked[-1].message
    assert "did not finish" not in question, question
    assert "1 row would be affected" in question, question
    assert not result.is_error
    assert rows(path, "SELECT label FROM nodes WHERE id = 4") == [("forbidden",)]
