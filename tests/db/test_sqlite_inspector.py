"""Classification of single statements by SQLite's own view, checked against the parser."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from safedb.db.sqlite.connections import GuardedConnection, open_inspector
from safedb.db.sqlite.inspector import SchemaFacts, inspect_statement, leading_keyword, schema_facts
from safedb.db.sqlite.tokens import with_integers_as_zero
from safedb.errors import (
    DeniedByPolicy,
    EmptyStatement,
    InvalidStatement,
    MultipleStatements,
    QueryFailed,
    TemporaryObject,
    TransactionControl,
)
from safedb.sql.classification import ChangeKind
from safedb.sql.structure import StatementShape, _remembered_shape, statement_shape

SETUP = """
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, delete_flag INTEGER, updated_at TEXT);
CREATE TABLE dropped_items (id INTEGER PRIMARY KEY, item_id INTEGER);
CREATE TABLE audit_trail (id INTEGER PRIMARY KEY, note TEXT);
CREATE TRIGGER items_audit AFTER DELETE ON items BEGIN INSERT INTO audit_trail (note) VALUES ('gone'); END;
CREATE VIEW item_names AS SELECT name FROM items;
CREATE INDEX items_name ON items(name);
INSERT INTO items (name) VALUES ('a'), ('b');
"""


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GuardedConnection]:
    path: Path = tmp_path_factory.mktemp("inspect") / "inspect.db"
    connection = sqlite3.connect(path)
    connection.executescript(SETUP)
    connection.close()
    guarded = open_inspector(path)
    yield guarded
    guarded.close()


def classify(inspector: GuardedConnection, sql: str) -> tuple[ChangeKind, ...]:
    with inspector.session(5) as connection:
        return inspect_statement(connection, sql, schema_facts(connection)).kinds


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'DROP TABLE x'",
        "select delete_flag, updated_at from items",
        "SELECT * FROM dropped_items",
        "SELECT name FROM item_names",
        "EXPLAIN SELECT * FROM items",
        "EXPLAIN QUERY PLAN SELECT * FROM items WHERE name = 'a'",
        "EXPLAIN DELETE FROM items",
        "PRAGMA table_info(items)",
        "PRAGMA user_version",
        "SELECT * FROM pragma_table_info('items')",
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) SELECT x FROM n",
        "VALUES (1, 2)",
        "  -- a comment\n  SELECT 1 /* trailing */ ;  ",
        "SeLeCt CoUnT(*) FrOm items",
    ],
)
def test_reads_are_read_only(inspector: GuardedConnection, sql: str) -> None:
    assert classify(inspector, sql) == ()


@pytest.mark.parametrize(
    ("sql", "kinds"),
    [
        ("DELETE FROM items WHERE id = 1", (ChangeKind.DELETE, ChangeKind.INSERT)),  # the trigger writes
        ("WITH doomed AS (SELECT id FROM items) DELETE FROM dropped_items", (ChangeKind.DELETE,)),
        ("INSERT INTO dropped_items (item_id) VALUES (1)", (ChangeKind.INSERT,)),
        ("INSERT OR REPLACE INTO dropped_items (id, item_id) VALUES (1, 1)", (ChangeKind.REPLACE,)),
        ("REPLACE INTO dropped_items (id, item_id) VALUES (1, 1)", (ChangeKind.REPLACE,)),
        (
            "INSERT INTO dropped_items (id, item_id) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET item_id = 2",
            (ChangeKind.UPSERT, ChangeKind.UPDATE),
        ),
        ("UPDATE items SET name = 'c'", (ChangeKind.UPDATE,)),
        ("DROP TABLE dropped_items", (ChangeKind.DROP,)),
        ("CREATE TABLE t2 (a)", (ChangeKind.CREATE,)),
        ("CREATE INDEX i2 ON items(updated_at)", (ChangeKind.CREATE,)),
        ("ALTER TABLE items RENAME TO things", (ChangeKind.RENAME,)),
        ("ALTER TABLE items ADD COLUMN extra TEXT", (ChangeKind.ALTER,)),
        ("DROP VIEW item_names", (ChangeKind.DROP,)),
        ("DROP TRIGGER items_audit", (ChangeKind.DROP,)),
        ("VACUUM", (ChangeKind.VACUUM,)),
        ("VACUUM INTO '/tmp/copy.db'", (ChangeKind.VACUUM,)),
        ("ATTACH DATABASE 'other.db' AS other", (ChangeKind.ATTACH,)),
        ("DETACH DATABASE other", (ChangeKind.DETACH,)),
        ("PRAGMA user_version = 7", (ChangeKind.PRAGMA,)),
        ("PRAGMA foreign_keys = OFF", (ChangeKind.PRAGMA,)),
        ("PRAGMA journal_mode = WAL", (ChangeKind.PRAGMA,)),
        ("PRAGMA query_only = 0", (ChangeKind.PRAGMA,)),
        ("REINDEX items_name", (ChangeKind.REINDEX,)),
        ("ANALYZE", (ChangeKind.ANALYZE,)),
        ("SELECT load_extension('evil')", (ChangeKind.LOAD_EXTENSION,)),
    ],
)
def test_changes_are_classified(inspector: GuardedConnection, sql: str, kinds: tuple[ChangeKind, ...]) -> None:
    assert classify(inspector, sql) == kinds


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("", EmptyStatement),
        ("  ;; -- nothing\n", EmptyStatement),
        ("SELECT 1; DELETE FROM items", MultipleStatements),
        ("DELETE FROM items; SELECT 1", MultipleStatements),
        ("BEGIN", TransactionControl),
        ("COMMIT", TransactionControl),
        ("SAVEPOINT s1", TransactionControl),
        ("RELEASE s1", TransactionControl),
        ("SELEC 1", InvalidStatement),
        ("\u00a0DELETE FROM items", InvalidStatement),  # a no-break space is part of a name to SQLite, not empty
        ("SELECT * FROM no_such_table", InvalidStatement),
        ("SELECT 1\x00; DROP TABLE items", InvalidStatement),
        ("CREATE TEMP TABLE scratch (a)", TemporaryObject),
        ("CREATE TABLE temp.scratch (a)", TemporaryObject),
        ("CREATE TEMPORARY VIEW v AS SELECT 1", TemporaryObject),
        ("CREATE TRIGGER temp.t AFTER INSERT ON main.items BEGIN DELETE FROM items; END", TemporaryObject),
        ("CREATE VIRTUAL TABLE temp.words USING fts5(word)", TemporaryObject),
        ("SELECT sql FROM sqlite_stmt", DeniedByPolicy),
        ("SELECT (SELECT group_concat(sql) FROM main.SQLITE_STMT)", DeniedByPolicy),
    ],
)
def test_refused_statements(inspector: GuardedConnection, sql: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        classify(inspector, sql)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("begin deferred", "(BEGIN)"),
        ("SAVEPOINT s1", "(SAVEPOINT s1)"),
        ("RELEASE SAVEPOINT s1", "(RELEASE s1)"),
        ("ROLLBACK TO s1", "(ROLLBACK TO s1)"),
        ("ROLLBACK", "(ROLLBACK)"),
    ],
)
def test_transaction_control_is_named_as_the_statement_says(inspector: GuardedConnection, sql: str, named: str) -> None:
    """SQLite names a savepoint's operations BEGIN, RELEASE and ROLLBACK: `SAVEPOINT s1` was refused as `BEGIN s1`."""
    with pytest.raises(TransactionControl, match=re.escape(f"Transaction control {named} is not accepted")):
        classify(inspector, sql)


def test_the_inspector_cannot_write_even_if_asked(inspector: GuardedConnection) -> None:
    with inspector.session(5) as connection, pytest.raises(sqlite3.DatabaseError):
        connection.execute("DELETE FROM items")


@pytest.mark.parametrize(
    ("sql", "keyword"),
    [
        ("select 1", "SELECT"),
        ("-- x\n/* y */ explain select 1", "EXPLAIN"),
        (";;", None),
        ("/* open", None),
        ("\u00a0select 1", None),
    ],
)
def test_leading_keyword(sql: str, keyword: str | None) -> None:
    assert leading_keyword(sql) == keyword


def test_a_locked_database_is_a_failure_not_an_invalid_statement(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    setup = sqlite3.connect(path)
    setup.executescript(SETUP)
    setup.close()
    inspector = open_inspector(path, on_event_loop=True)  # never waits for a lock
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        with pytest.raises(QueryFailed, match="locked"), inspector.session(5) as connection:
            inspect_statement(connection, "SELECT name FROM items", SchemaFacts())
        writer.execute("COMMIT")
        assert classify(inspector, "SELECT name FROM items") == ()
    finally:
        writer.close()
        inspector.close()


def test_a_trigger_that_writes_sqlite_s_own_tables_is_shown_in_full(tmp_path: Path) -> None:
    path = tmp_path / "bookkeeping.db"
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT);
        CREATE TABLE plain (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT);
        INSERT INTO log (note) VALUES ('first');
        ANALYZE;
        CREATE TRIGGER log_rewrites AFTER INSERT ON log BEGIN
            DELETE FROM sqlite_sequence WHERE name = 'log';
            UPDATE sqlite_stat1 SET stat = '1000000 1';
        END;
        """
    )
    connection.close()
    inspector = open_inspector(path)
    try:
        with inspector.session(5) as session:
            schema = schema_facts(session)
            triggered = inspect_statement(session, "INSERT INTO log (note) VALUES ('x')", schema)
            plain = inspect_statement(session, "INSERT INTO plain (note) VALUES ('x')", schema)
    finally:
        inspector.close()
    touched = {(change.kind, change.target.name, change.via) for change in triggered.changes}
    assert touched == {
        (ChangeKind.INSERT, "log", None),
        (ChangeKind.DELETE, "sqlite_sequence", "log_rewrites"),
        (ChangeKind.UPDATE, "sqlite_stat1", "log_rewrites"),
    }
    # SQLite's own counting for AUTOINCREMENT is not a change of the statement's.
    assert [(change.kind, change.target.name) for change in plain.changes] == [(ChangeKind.INSERT, "plain")]


def test_a_statement_nested_past_the_parser_s_depth_is_asked_about_not_a_crash(inspector: GuardedConnection) -> None:
    """SQLite compiles 60 nested parentheses; sqlglot (the Python build SafeDB installs) runs out of Python recursion
    and cannot confirm a read."""
    assert classify(inspector, "SELECT " + "(" * 60 + "1" + ")" * 60) == (ChangeKind.UNKNOWN,)


def test_a_statement_nested_past_the_parser_s_limit_is_not_a_read_and_not_a_crash() -> None:
    """SQLite 3.40 refuses such nesting itself ("parser stack overflow"); later versions grow their parser's stack.
    Compiled sqlglot crashed the whole process on 20,000 parentheses in a FROM clause."""
    for nested in ("SELECT * FROM " + "(" * 20_000 + "t" + ")" * 20_000, "SELECT " + "(" * 150 + "1" + ")" * 150):
        assert statement_shape(nested, "sqlite") == StatementShape(root="unparsed", read_form=False)
    # Parentheses in a string or a comment are not nesting.
    assert statement_shape("SELECT '" + "(" * 200 + "' /* " + "(" * 200 + " */", "sqlite").read_form
    assert statement_shape("SELECT * FROM " + "(" * 30 + "t" + ")" * 30, "sqlite").read_form


@pytest.mark.parametrize("text", ["( ALL - ->> IF", "SELECT 'unterminated", "SELECT 1 FROM"])
def test_text_the_parser_fails_on_in_any_way_is_not_a_read(text: str) -> None:
    """Compiled, sqlglot raises a TypeError on the first, where the Python one raises a ParseError."""
    assert statement_shape(text, "sqlite") == StatementShape(root="unparsed", read_form=False)


@pytest.mark.parametrize(
    ("sql", "form"),
    [
        ("SELECT * FROM items WHERE id = 42 LIMIT 10", "SELECT * FROM items WHERE id = 0 LIMIT 0"),
        ("SELECT ?1, :2, $3, @4, 007", "SELECT ?0, :0, $0, @0, 0"),
        # Strings, blobs, quoted names, comments, names with digits and other numbers stay as they are.
        ("SELECT '42', x'00ff', \"c1\", [2], `3` FROM t1 -- 4\n/* 5 */", None),
        ("SELECT 1.5, .5e3, 1e5, 0x1F, 1_000, 12abc, t2.c3", None),
        ("VACUUM INTO 'copy1.db'", None),
    ],
)
def test_texts_of_one_form_differ_only_in_integers(sql: str, form: str | None) -> None:
    assert with_integers_as_zero(sql) == (sql if form is None else form)


def test_a_statement_for_another_number_is_not_parsed_again(inspector: GuardedConnection) -> None:
    """The parser's reading of a statement's form is remembered by its text with the integers as 0 (`read-new-*`
    in docs/benchmarks.md: the parse was SafeDB's largest cost on a statement never seen before)."""
    query = "SELECT name FROM items WHERE id = {} AND 1 > 0 -- test_a_statement_for_another_number"
    assert classify(inspector, query.format(1)) == ()
    parsed = _remembered_shape.cache_info().misses
    assert classify(inspector, query.format(2)) == ()
    assert classify(inspector, query.format(12345)) == ()
    assert _remembered_shape.cache_info().misses == parsed


def test_statements_of_other_forms_keep_their_own_readings(inspector: GuardedConnection) -> None:
    """Only integers are left out of what the parser is asked: a REPLACE is no INSERT, and each VACUUM INTO keeps
    its own file."""
    assert classify(inspector, "INSERT INTO items (id, name) VALUES (7, 'x')") == (ChangeKind.INSERT,)
    assert classify(inspector, "INSERT OR REPLACE INTO items (id, name) VALUES (8, 'x')") == (ChangeKind.REPLACE,)
    with inspector.session(5) as connection:
        for name in ("copy1.db", "copy2.db"):
            vacuum = inspect_statement(connection, f"VACUUM INTO '{name}'", schema_facts(connection))
            assert [change.target.name for change in vacuum.changes] == [name]
