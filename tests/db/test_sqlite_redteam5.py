"""Fifth red-team pass over the SQLite backend: what it found, as tests.

- A BLOB literal whose bytes are not UTF-8 (`x'ff'`, `x'deadbeef'`) made every statement holding one fail to
  classify: SQLite lists the literal as text in the compiled program, which Python could not decode.
- SQLite past its memory limit makes Python's sqlite3 raise MemoryError, not an sqlite3.Error: the call
  ended in a traceback ("Error executing tool execute_query"), and a dry run did not say why it stopped.
- `PRAGMA journal_mode = OFF` could be approved. It held on the one writer connection it ran on, and every
  later dry run there (the worker thread's) could no longer be rolled back: a declined UPDATE of 15,000 rows
  left some 7,000 of them changed in the file.
- `PRAGMA locking_mode = EXCLUSIVE` could be approved: after the writer's next change it kept its lock on the
  file, so every read failed ("database is locked"), and so did classifying `PRAGMA locking_mode = NORMAL`,
  until the server restarted.
- `PRAGMA hard_heap_limit = 100000` could be approved: SQLite's heap limit is the process's, and can only be
  lowered, so every later statement of the server failed with an out-of-memory traceback, on every database it
  serves and in its audit log, until it restarted. The other process-wide pragmas are refused with it.
- A function stored in the schema (a generated column's, a CHECK constraint's) is compiled into the program of
  each statement that uses it, and never reported to the authorizer: a read of `g AS (instr(a, b))` over
  values of 260,000 characters ran on the event loop, holding up every client for 0.7 s past a 0.5 s time
  limit (hours, for values of a million); so did the dry run of an insert checked by such a constraint, even
  through a trigger.
- Finding a statement's first word stripped its leading empty statements (`;`) one at a time, copying the
  rest of the text each time: a statement of 1,000,000 characters, `' ;'` over and over, took 6.6 s of Python
  in a worker thread, where no time limit or interrupt reaches, holding one of the inspectors.
- A statement that writes a shadow table itself while it names the virtual table too (`DELETE FROM docs_data
  WHERE EXISTS (SELECT * FROM docs)`) had its write left out as the module's bookkeeping: it was asked as an
  unrecognised change of "the statement", or, when a trigger on the shadow table wrote elsewhere, as that
  trigger's write alone.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import DeniedByPolicy, InvalidStatement, QueryFailed
from safedb.sql.classification import ChangeKind
from safedb.sql.structure import functions_in_checks, says_replace
from tests.helpers import Responder, in_process_server, rows, safedb_serve, watching_the_loop

pytestmark = pytest.mark.anyio


async def test_a_blob_literal_that_is_not_utf8_is_classified(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        read = await database.classify("SELECT count(*) FROM items WHERE name = x'deadbeef' OR name = x'ff'")
        assert read.read_only
        assert (await database.read(read)).rows == ((0,),)
        insert = await database.classify("INSERT INTO items (name) VALUES (x'ff')")
        assert insert.kinds == (ChangeKind.INSERT,)
    finally:
        await database.aclose()


# Ten values of 60 MB held at once: past the 512 MiB SQLite may hold, within the 64 MiB a value may take.
_TEN_LARGE_VALUES = ", ".join(f"x'00' || zeroblob(60000000) AS v{i}" for i in range(10))


async def test_running_out_of_memory_is_a_failure_not_a_crash(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        read = await database.classify(f"SELECT {_TEN_LARGE_VALUES}")
        with pytest.raises(QueryFailed, match="out of memory"):
            await database.read(read)

        change = await database.classify(f"UPDATE items SET name = 'c' WHERE id = 1 RETURNING {_TEN_LARGE_VALUES}")
        impact = await database.preview(change)
        assert impact.rows_affected is None
        assert impact.lines == ("the dry run did not finish (SQLite reported: out of memory).",)
        with pytest.raises(QueryFailed, match="out of memory"):
            await database.write(change)
        # What SQLite had done before it ran out was rolled back, and the connections work on.
        assert rows(database_file, "SELECT name FROM items ORDER BY id") == [("a",), ("b",)]
        assert (await database.read(await database.classify("SELECT count(*) FROM items"))).rows == ((2,),)
    finally:
        await database.aclose()


async def test_running_out_of_memory_reaches_the_client_as_an_error_result(database_file: Path) -> None:
    async with (
        in_process_server(database_file) as (server, _),
        Client(server, elicitation_callback=Responder()) as client,
    ):
        result = await client.call_tool("execute_query", {"query": f"SELECT {_TEN_LARGE_VALUES}"})
    assert result.is_error
    assert "out of memory" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "statement",
    [
        "PRAGMA journal_mode = OFF",
        "PRAGMA main.journal_mode('Of')",
        "PRAGMA journal_mode = o",
        "EXPLAIN PRAGMA journal_mode=off",
    ],
)
async def test_turning_the_journal_off_is_refused(database_file: Path, statement: str) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        with pytest.raises(DeniedByPolicy, match="journal_mode = OFF is not allowed"):
            await database.classify(statement)
        # Other modes, and values SQLite takes for no mode (a query), are asked about or read as before.
        assert (await database.classify("PRAGMA journal_mode = persist")).kinds == (ChangeKind.PRAGMA,)
        assert (await database.classify("PRAGMA journal_mode = 'offline'")).kinds == (ChangeKind.PRAGMA,)
        assert (await database.classify("PRAGMA journal_mode")).read_only
    finally:
        await database.aclose()


async def test_a_declined_change_leaves_the_file_as_it_was_after_a_journal_mode_request(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, x TEXT)")
    # More than SQLite's page cache holds (2 MB), so that the dry run's changes reach the file before it ends.
    connection.executemany("INSERT INTO big (x) VALUES (?)", [("v" * 200,) for _ in range(15_000)])
    connection.commit()
    connection.close()
    responder = Responder()
    async with in_process_server(path) as (server, _), Client(server, elicitation_callback=responder) as client:
        await client.call_tool("execute_query", {"query": "PRAGMA journal_mode = OFF"})
        before = hashlib.sha256(path.read_bytes()).digest()
        responder.action = "decline"
        # printf keeps the dry run off the event loop, on the writer the pragma ran on.
        result = await client.call_tool("execute_query", {"query": "UPDATE big SET x = printf('%s', 'changed')"})
        assert "declined" in result.content[0].text.lower()  # type: ignore[union-attr]
        assert hashlib.sha256(path.read_bytes()).digest() == before
    assert rows(path, "SELECT count(*) FROM big WHERE x = 'changed'") == [(0,)]


async def test_an_exclusive_lock_cannot_be_approved_to_lock_out_every_read(database_file: Path) -> None:
    responder = Responder()
    async with (
        in_process_server(database_file) as (server, _),
        Client(server, elicitation_callback=responder) as client,
    ):
        await client.call_tool("execute_query", {"query": "PRAGMA locking_mode = EXCLUSIVE"})
        # printf keeps the change off the event loop, on the writer the pragma ran on.
        await client.call_tool("execute_query", {"query": "UPDATE items SET name = printf('%s', 'c') WHERE id = 1"})
        result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM items"})
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert rows(database_file, "SELECT name FROM items WHERE id = 1") == [("c",)]


@pytest.mark.parametrize(
    "statement",
    [
        "PRAGMA hard_heap_limit = 100000",
        "PRAGMA soft_heap_limit(1)",
        "PRAGMA temp_store_directory = '.'",
        "PRAGMA data_store_directory = '.'",
    ],
)
async def test_a_setting_of_the_whole_process_is_refused(database_file: Path, statement: str) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        with pytest.raises(DeniedByPolicy, match="for the whole server process"):
            await database.classify(statement)
        assert (await database.classify("PRAGMA hard_heap_limit")).read_only
    finally:
        await database.aclose()


async def test_a_lowered_heap_limit_cannot_be_approved_to_stop_the_server(database_file: Path) -> None:
    """Against a server process of its own: approved, the limit held for the whole process it ran in."""
    with safedb_serve(database_file) as server:
        for statement in ("PRAGMA hard_heap_limit = 100000", "SELECT count(*) FROM items"):
            with anyio.fail_after(30):
                async with Client(server.url, elicitation_callback=Responder()) as client:
                    result = await client.call_tool("execute_query", {"query": statement})
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert "2" in result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def stored_calls_file(tmp_path: Path) -> Path:
    """Table `t` of one row: `g AS (instr(a, b))` over values that make instr take some 0.7 s; table `checked`,
    whose CHECK calls instr; and a trigger on `log` that fills `checked` from `t`."""
    path = tmp_path / "stored.db"
    connection = sqlite3.connect(path)
    connection.executescript(
        f"""
        CREATE TABLE t (a TEXT, b TEXT, g AS (instr(a, b)));
        INSERT INTO t (a, b) SELECT s, substr(s, 1, {2**18}) || 'b'
            FROM (SELECT replace(hex(zeroblob({2**18})), '0', 'a') AS s);
        CREATE TABLE checked (a TEXT, b TEXT, CHECK (instr(a, b) >= 0));
        CREATE TABLE log (note TEXT);
        CREATE TRIGGER fill AFTER INSERT ON log BEGIN INSERT INTO checked SELECT a, b FROM t; END;
        """
    )
    connection.commit()
    connection.close()
    return path


async def test_a_function_of_a_generated_column_does_not_hold_up_the_event_loop(stored_calls_file: Path) -> None:
    database = SqliteDatabase(stored_calls_file, QueryLimits())
    try:
        classification = await database.classify("SELECT g FROM t")
        result, longest = await watching_the_loop(lambda: database.read(classification))
    finally:
        await database.aclose()
    assert result.rows == ((0,),)
    assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"


@pytest.mark.parametrize(
    "statement", ["INSERT INTO checked SELECT a, b FROM t", "INSERT INTO log (note) VALUES ('fill')"]
)
async def test_a_function_of_a_check_constraint_does_not_hold_up_the_event_loop_in_a_dry_run(
    stored_calls_file: Path, statement: str
) -> None:
    database = SqliteDatabase(stored_calls_file, QueryLimits())
    try:
        classification = await database.classify(statement)
        impact, longest = await watching_the_loop(lambda: database.preview(classification))
    finally:
        await database.aclose()
    assert impact.rows_affected is not None, impact.lines
    assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"


@pytest.mark.parametrize(
    ("definition", "functions"),
    [
        ("CREATE TABLE a (n INTEGER CHECK (n >= 0), s TEXT CHECK (s IN ('x', 'y')), v VARCHAR(10))", set()),
        (
            "CREATE TABLE b (s TEXT, CHECK (length(s) < 5 AND (s GLOB 'a*' OR instr(s, 'z'))))",
            {"length", "glob", "instr"},
        ),
        ("CREATE TABLE c (s TEXT DEFAULT (printf('%d', 1)), \"check\" TEXT, t TEXT DEFAULT 'check (x)')", set()),
        ("CREATE TABLE d (s TEXT CHECK (s LIKE '%@%')) -- check (upper(s))", {"like"}),
    ],
)
def test_the_functions_of_check_constraints_are_read_from_the_definition(definition: str, functions: set[str]) -> None:
    """An inspector's program leaves CHECK constraints out (SQLite does not load them for a database it opened
    read-only), so their functions are read from the table's definition; defaults and the rest are in the
    program."""
    assert functions_in_checks(definition) == functions


@pytest.mark.parametrize("text", ["-- replace", "/* check (replace(x)) */"])
def test_a_text_of_comments_only_neither_replaces_nor_calls(text: str) -> None:
    """A text without a single token (once failed on pairing each token with the next)."""
    assert not says_replace(text)
    assert functions_in_checks(text) == frozenset()


async def test_many_empty_statements_before_one_are_skipped_at_once(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=1.0))
    statement = " ;" * 499_990 + "SELECT 1"
    try:
        started = time.monotonic()
        with pytest.raises(InvalidStatement):  # SQLite reads `EXPLAIN ;`: a syntax error
            await database.classify(statement)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert elapsed < 0.75, f"classifying took {elapsed:.2f} s"


@pytest.fixture
def fts_file(tmp_path: Path) -> Path:
    """An FTS5 table `docs` of one row, and a trigger on its shadow table `docs_content` that writes `notes`."""
    path = tmp_path / "fts.db"
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
        "CREATE VIRTUAL TABLE docs USING fts5(body); INSERT INTO docs VALUES ('hello world');"
        "CREATE TRIGGER note_it AFTER DELETE ON docs_content BEGIN INSERT INTO notes (body) VALUES ('x'); END;"
    )
    connection.commit()
    connection.close()
    return path


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("DELETE FROM docs_data WHERE EXISTS (SELECT * FROM docs)", {(ChangeKind.DELETE, "docs_data")}),
        (
            "DELETE FROM docs_content WHERE id IN (SELECT rowid FROM docs)",
            {(ChangeKind.DELETE, "docs_content"), (ChangeKind.INSERT, "notes")},
        ),
    ],
)
async def test_a_shadow_table_written_by_the_statement_itself_is_shown_though_it_names_the_virtual_table(
    fts_file: Path, statement: str, expected: set[tuple[ChangeKind, str]]
) -> None:
    database = SqliteDatabase(fts_file, QueryLimits())
    try:
        classification = await database.classify(statement)
        assert {(change.kind, change.target.name) for change in classification.changes} == expected
        # Counted like any data change (FTS5 keeps 3 rows in docs_data here), and run as approved.
        impact = await database.preview(classification)
        assert impact.rows_affected == (3 if "docs_data" in statement else 2)
        await database.write(classification, impact.bounds)
        # The module's own reads and writes of its shadow tables are still its bookkeeping.
        insert = await database.classify("INSERT INTO docs VALUES ('again')")
        assert {(change.kind, change.target.name) for change in insert.changes} == {(ChangeKind.INSERT, "docs")}
    finally:
        await database.aclose()
