"""The pure PostgreSQL classifier: pglast tree -> changes, function references, refusals (no server needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from safedb.errors import (
    DeniedByPolicy,
    EmptyStatement,
    InvalidStatement,
    MultipleStatements,
    StatementRefused,
    TemporaryObject,
    TransactionControl,
)
from safedb.sql.classification import ChangeKind as K
from safedb.sql.postgres_classifier import MAX_STATEMENT_CHARS, analyze_statement
from safedb.sql.postgres_functions import CatalogFunction, FunctionRef, function_changes

TREE_CASES = [
    ("SELECT 1", set()),
    ("SELECT 'DELETE FROM t; DROP TABLE t' AS text", set()),
    ('SELECT "update", "drop" FROM "delete"', set()),
    ("VALUES (1), (2)", set()),
    ("TABLE accounts", set()),
    ("SHOW search_path", set()),
    ("EXPLAIN SELECT * FROM accounts", set()),
    ("EXPLAIN DELETE FROM accounts", set()),
    ("EXPLAIN ANALYZE SELECT 1", set()),
    ("EXPLAIN (ANALYZE false) DELETE FROM accounts", set()),
    ("EXPLAIN (ANALYZE) DELETE FROM accounts", {K.DELETE}),
    ("EXPLAIN (ANALYZE true, BUFFERS) UPDATE accounts SET balance = 0", {K.UPDATE}),
    ("EXPLAIN (ANALYZE false, ANALYZE true) DELETE FROM accounts", {K.DELETE}),
    ("EXPLAIN (ANALYZE off, ANALYZE) DELETE FROM accounts", {K.DELETE}),
    ("EXPLAIN (ANALYZE off, ANALYZE 'no') DELETE FROM accounts", set()),
    ("WITH gone AS (DELETE FROM accounts RETURNING *) SELECT count(*) FROM gone", {K.DELETE}),
    ("SELECT * FROM (WITH x AS (UPDATE notes SET body = '' RETURNING id) SELECT * FROM x) AS s", {K.UPDATE}),
    ("WITH a AS (INSERT INTO notes VALUES (5, 'x') RETURNING id) SELECT * FROM a", {K.INSERT}),
    ("SELECT * INTO copy_of_accounts FROM accounts", {K.CREATE}),
    ("CREATE TABLE t2 AS SELECT * FROM accounts", {K.CREATE}),
    ("CREATE MATERIALIZED VIEW mv AS SELECT 1", {K.CREATE}),
    ("SELECT * FROM accounts FOR UPDATE", {K.LOCK}),
    ("SELECT * FROM accounts a JOIN notes n ON true FOR SHARE OF a", {K.LOCK}),
    ("INSERT INTO notes VALUES (3, 'x') ON CONFLICT (id) DO UPDATE SET body = 'y'", {K.UPSERT}),
    ("INSERT INTO notes VALUES (3, 'x') ON CONFLICT DO NOTHING", {K.INSERT}),
    ("MERGE INTO notes n USING accounts a ON n.id = a.id WHEN MATCHED THEN DELETE", {K.MERGE}),
    ("TRUNCATE accounts, notes", {K.TRUNCATE}),
    ("GRANT SELECT ON accounts TO PUBLIC", {K.GRANT}),
    ("REVOKE ALL ON accounts FROM PUBLIC", {K.REVOKE}),
    ("GRANT pg_read_server_files TO safedb_reader", {K.GRANT}),
    ("ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC", {K.GRANT}),
    ("CREATE ROLE intruder SUPERUSER LOGIN", {K.ROLE}),
    ("ALTER ROLE safedb_reader WITH SUPERUSER", {K.ROLE}),
    ("DROP ROLE safedb_reader", {K.DROP}),
    ("ALTER ROLE safedb_reader SET default_transaction_read_only = off", {K.SETTING}),
    ("ALTER DATABASE postgres SET work_mem = '1GB'", {K.SETTING}),
    ("ALTER SYSTEM SET max_connections = 5", {K.SETTING}),
    ("ALTER SYSTEM RESET ALL", {K.SETTING}),
    ("DO $$ BEGIN DELETE FROM accounts; END $$", {K.DO}),
    ("CALL archive_everything()", {K.CALL}),
    ("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE", {K.LOCK}),
    ("NOTIFY jobs, 'payload'", {K.NOTIFY}),
    ("VACUUM FULL accounts", {K.VACUUM}),
    ("ANALYZE accounts", {K.ANALYZE}),
    ("REINDEX TABLE accounts", {K.REINDEX}),
    ("CLUSTER accounts USING accounts_pkey", {K.CLUSTER}),
    ("CHECKPOINT", {K.CHECKPOINT}),
    ("REFRESH MATERIALIZED VIEW mv", {K.REFRESH}),
    ("COMMENT ON TABLE accounts IS 'x'", {K.COMMENT}),
    ("DROP TABLE accounts CASCADE", {K.DROP}),
    ("DROP SCHEMA public CASCADE", {K.DROP}),
    ("CREATE INDEX CONCURRENTLY ON accounts (owner)", {K.CREATE}),
    ("ALTER TABLE accounts ADD COLUMN x int", {K.ALTER}),
    ("ALTER TABLE accounts RENAME TO wallets", {K.RENAME}),
    ("CREATE EXTENSION dblink", {K.CREATE}),
    ("CREATE DATABASE other", {K.CREATE}),
    ("SECURITY LABEL ON TABLE accounts IS 'secret'", {K.ALTER}),
]


@pytest.mark.parametrize(("sql", "kinds"), TREE_CASES, ids=[case[0][:60] for case in TREE_CASES])
def test_tree_changes(sql: str, kinds: set[K]) -> None:
    statement = analyze_statement(sql)
    assert set(statement.classification.kinds) == kinds
    assert statement.classification.read_only is (not kinds)


@pytest.mark.parametrize(
    ("sql", "error", "words"),
    [
        ("", EmptyStatement, "empty"),
        (" ;; -- nothing", EmptyStatement, "empty"),
        ("SELECT 1; SELECT 2", MultipleStatements, "more than one"),
        ("SELECT 1; DELETE FROM accounts", MultipleStatements, "more than one"),
        ("BEGIN", TransactionControl, "BEGIN"),
        ("START TRANSACTION READ WRITE", TransactionControl, "START TRANSACTION"),
        ("COMMIT", TransactionControl, "COMMIT"),
        ("SAVEPOINT s", TransactionControl, "SAVEPOINT"),
        ("SET TRANSACTION READ WRITE", TransactionControl, "SET TRANSACTION"),
        ("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", TransactionControl, "SESSION CHARACTERISTICS"),
        ("SET default_transaction_read_only = off", TransactionControl, "default_transaction_read_only"),
        ("SET transaction_read_only TO off", TransactionControl, "transaction_read_only"),
        ("SET ROLE postgres", DeniedByPolicy, "role"),
        ("SET SESSION AUTHORIZATION postgres", DeniedByPolicy, "role"),
        ("RESET ROLE", DeniedByPolicy, "role"),
        ("SET search_path = evil", DeniedByPolicy, "session"),
        ("SET LOCAL statement_timeout = 0", DeniedByPolicy, "session"),
        ("RESET ALL", DeniedByPolicy, "session"),
        ("PREPARE p AS DELETE FROM accounts", DeniedByPolicy, "PREPARE"),
        ("EXECUTE p", DeniedByPolicy, "EXECUTE"),
        ("DEALLOCATE ALL", DeniedByPolicy, "DEALLOCATE"),
        ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", DeniedByPolicy, "DECLARE"),
        ("LISTEN jobs", DeniedByPolicy, "LISTEN"),
        ("DISCARD ALL", DeniedByPolicy, "DISCARD"),
        ("LOAD 'plpgsql'", DeniedByPolicy, "shared library"),
        ("COPY accounts TO PROGRAM 'cat > /tmp/x'", DeniedByPolicy, "shell command"),
        ("COPY accounts FROM '/etc/passwd'", DeniedByPolicy, "files"),
        ("COPY accounts TO STDOUT", DeniedByPolicy, "SELECT"),
        ("COPY accounts FROM STDIN", DeniedByPolicy, "INSERT"),
        ("EXPLAIN ANALYZE EXECUTE p", DeniedByPolicy, "EXECUTE"),
        ("SELEC 1", InvalidStatement, "syntax error"),
        ("SELECT 'unterminated", InvalidStatement, "cannot parse"),
        ("CREATE TEMP TABLE scratch (id int)", TemporaryObject, "Temporary"),
        ("CREATE TABLE pg_temp.scratch (id int)", TemporaryObject, "Temporary"),
        ("CREATE TEMP VIEW v AS SELECT 1", TemporaryObject, "Temporary"),
        ("CREATE TEMPORARY SEQUENCE s", TemporaryObject, "Temporary"),
        ("CREATE TEMP TABLE t AS SELECT * FROM accounts", TemporaryObject, "Temporary"),
        ("SELECT * INTO TEMP t FROM accounts", TemporaryObject, "Temporary"),
        ("EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1", TemporaryObject, "Temporary"),
        ("CREATE FUNCTION pg_temp.f() RETURNS int AS 'SELECT 1' LANGUAGE sql", TemporaryObject, "Temporary"),
        ("CREATE DOMAIN pg_temp.positive AS int CHECK (VALUE > 0)", TemporaryObject, "Temporary"),
    ],
)
def test_refusals(sql: str, error: type[StatementRefused], words: str) -> None:
    with pytest.raises(error) as caught:
        analyze_statement(sql)
    assert words.lower() in str(caught.value).lower()


def test_functions_are_collected_everywhere() -> None:
    statement = analyze_statement(
        "SELECT u.owner, (u.balance).double_it, lower(x.y) FROM accounts u, "
        "generate_series(1, nextval('tickets')) AS g, LATERAL pg_catalog.pg_sleep(0) AS s "
        "WHERE u.id IN (SELECT setval('tickets', 5)) ORDER BY abs(u.id)"
    )
    names = {(ref.name, ref.schema, ref.attribute) for ref in statement.functions}
    assert {
        ("owner", None, True),
        ("double_it", None, True),
        ("lower", None, False),
        ("generate_series", None, False),
        ("nextval", None, False),
        ("pg_sleep", "pg_catalog", False),
        ("setval", None, False),
        ("abs", None, False),
    } <= names
    assert next(ref for ref in statement.functions if ref.name == "nextval").argument == "tickets"
    assert {relation.name for relation in statement.relations} == {"accounts"}
    assert statement.classification.read_only  # the tree alone shows no change: the catalog decides


def _row(name: str, volatility: str, schema: str = "pg_catalog", one: bool = True) -> CatalogFunction:
    return CatalogFunction(schema, name, volatility, True, one)


@pytest.mark.parametrize(
    ("ref", "catalog", "kinds"),
    [
        (FunctionRef("lower"), [_row("lower", "i")], set()),
        (FunctionRef("now"), [_row("now", "s")], set()),
        (FunctionRef("random"), [_row("random", "v")], set()),
        (FunctionRef("pg_sleep"), [_row("pg_sleep", "v")], set()),
        (FunctionRef("random"), [_row("random", "v"), _row("random", "v", schema="public")], {K.FUNCTION_CALL}),
        (FunctionRef("bump"), [_row("bump", "v", schema="public")], {K.FUNCTION_CALL}),
        (FunctionRef("nosuch"), [], {K.UNKNOWN}),
        (FunctionRef("nextval", argument="s"), [_row("nextval", "v")], {K.SEQUENCE}),
        (FunctionRef("setval"), [_row("setval", "v")], {K.SEQUENCE}),
        (FunctionRef("pg_advisory_lock"), [_row("pg_advisory_lock", "v")], {K.LOCK}),
        (FunctionRef("pg_terminate_backend"), [_row("pg_terminate_backend", "v")], {K.FUNCTION_CALL}),
        (FunctionRef("lo_unlink"), [_row("lo_unlink", "v")], {K.FUNCTION_CALL}),
        (FunctionRef("dblink_exec"), [], {K.FUNCTION_CALL}),
        (FunctionRef("set_config"), [_row("set_config", "v")], {K.FUNCTION_CALL}),
        (FunctionRef("owner", attribute=True), [], set()),
        (FunctionRef("shout", attribute=True), [_row("shout", "v", schema="public")], {K.FUNCTION_CALL}),
        (FunctionRef("shout", attribute=True), [_row("shout", "v", schema="public", one=False)], set()),
    ],
)
def test_function_judgement(ref: FunctionRef, catalog: list[CatalogFunction], kinds: set[K]) -> None:
    assert {change.kind for change in function_changes([ref], catalog)} == kinds


@pytest.mark.parametrize("name", ["pg_read_file", "pg_ls_dir", "lo_import", "lo_export", "pg_stat_file"])
def test_file_functions_are_denied(name: str) -> None:
    with pytest.raises(DeniedByPolicy, match="files on the database server"):
        function_changes([FunctionRef(name)], [_row(name, "v")])


def test_functions_behind_views_are_judged() -> None:
    via_view = CatalogFunction("public", "shout", "v", True, True, via="loud_notes")
    changes = function_changes([], [via_view])
    assert [(change.kind, change.via) for change in changes] == [(K.FUNCTION_CALL, "loud_notes")]
    assert function_changes([], [CatalogFunction("pg_catalog", "lower", "i", True, True, via="calm")]) == []


def test_statement_text_drops_surrounding_semicolons() -> None:
    assert analyze_statement("  SELECT 1 ;;  ").text == "SELECT 1"
    assert analyze_statement("/* lead */ SELECT 'a;b' -- tail").text == "SELECT 'a;b' -- tail"


def test_statement_text_is_whole_after_text_of_several_bytes_a_character() -> None:
    """The parser places statements in characters: text sliced as bytes lost its end (`id > 1`)."""
    sql = "DELETE FROM invoices WHERE status = 'Zoëë' OR id > 100;"
    assert analyze_statement(sql).text == sql.removesuffix(";")
    assert analyze_statement("/*ééé*/SELECT 'ü'").text == "SELECT 'ü'"


def test_a_nul_character_is_refused_because_everything_after_it_would_be_ignored() -> None:
    with pytest.raises(InvalidStatement, match="NUL"):
        analyze_statement("DELETE FROM invoices\x00 WHERE id = 3")


def test_a_deeply_nested_expression_is_classified_without_crashing_the_process() -> None:
    """Some 25,000 nested `+` used to overflow the C stack of the parser (a segfault, in the server)."""
    script = (
        "from safedb.sql.postgres_classifier import analyze_statement\n"
        "statement = analyze_statement('SELECT 1' + ' + 1' * 25_000)\n"
        "print(statement.classification.read_only, len(statement.text))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["True", str(len("SELECT 1") + 4 * 25_000)]


def test_a_statement_past_the_length_limit_is_refused_plainly() -> None:
    with pytest.raises(InvalidStatement, match="1,000,000 characters"):
        analyze_statement("SELECT 1" + " " * MAX_STATEMENT_CHARS)


@pytest.mark.parametrize(
    ("sql", "in_transaction"),
    [
        ("DELETE FROM accounts", True),
        ("VACUUM accounts", False),
        ("ANALYZE accounts", True),
        ("CREATE DATABASE x", False),
        ("ALTER SYSTEM SET work_mem = '8MB'", False),
        ("CREATE INDEX CONCURRENTLY i ON accounts (owner)", False),
        ("CREATE INDEX i ON accounts (owner)", True),
        ("CALL p()", False),
    ],
)
def test_statements_that_run_outside_a_transaction(sql: str, in_transaction: bool) -> None:
    assert analyze_statement(sql).in_transaction is in_transaction


@pytest.mark.parametrize(
    "sql", ["DELETE FROM accounts WHERE id = 1", "SELECT 1" + " + 1" * 5000], ids=["short", "long"]
)
def test_an_analyzed_statement_is_remembered(sql: str) -> None:
    """One approved call analyzes its statement up to four times; the parse happens once."""
    assert analyze_statement(sql) is analyze_statement(sql)


@pytest.mark.parametrize(
    ("sql", "shown"),
    [
        ("ALTER TABLE t DROP COLUMN v CASCADE", "alter table t (drop column v and its data, with CASCADE)"),
        (
            "ALTER TABLE t ALTER COLUMN v TYPE int USING 0",
            "alter table t (set every value of column v from a USING expression, as a new type)",
        ),
        (
            "ALTER TABLE t ALTER COLUMN v TYPE bigint, ADD COLUMN w int",
            "alter table t (convert every value of column v to a new type; add column w)",
        ),
        ("ALTER TABLE t DISABLE TRIGGER ALL", "alter table t (disable all its triggers)"),
        ("ALTER TABLE t SET (fillfactor = 50)", "alter table t (set rel options)"),
    ],
)
def test_an_alter_table_question_says_what_each_action_does(sql: str, shown: str) -> None:
    (change,) = analyze_statement(sql).classification.changes

    assert str(change) == shown


def test_a_role_named_by_a_keyword_is_shown_by_that_keyword() -> None:
    (change,) = analyze_statement("DROP OWNED BY CURRENT_USER").classification.changes

    assert change.target.name == "current_user"


@pytest.mark.parametrize(
    ("sql", "lines"),
    [
        (
            "TRUNCATE accounts, notes RESTART IDENTITY",
            [
                "truncate table accounts (and restart the sequences its columns own: new rows take old ids again)",
                "truncate table notes (and restart the sequences its columns own: new rows take old ids again)",
            ],
        ),
        ("TRUNCATE accounts CONTINUE IDENTITY", ["truncate table accounts"]),
    ],
)
def test_a_truncate_says_when_it_restarts_sequences(sql: str, lines: list[str]) -> None:
    """Found by red-teaming: the question for TRUNCATE ... RESTART IDENTITY read as a plain TRUNCATE's, though the
    table's ids start again from their first value."""
    assert list(analyze_statement(sql).classification.change_lines) == lines
