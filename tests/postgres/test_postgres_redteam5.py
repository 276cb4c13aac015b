"""Red team, fifth pass: effects SafeDB lets happen before anyone answers, or that outlive a call.

- the preview of a TRUNCATE, DROP, ALTER, LOCK, VACUUM... of a table counts its rows with a plain
  `SELECT count(*)` as the reader, and planning that folds the table's partition key, extended statistics
  and index expressions, which nobody judged: the question alone runs their code;
- `describe_table`, a tool that never asks, counts the table's rows the same way, and also runs its
  row-security policies (as the reader, to whom they apply);
- the question about a TRUNCATE says how many rows the table loses, and nothing of the TRUNCATE triggers
  that will run when it is approved (a DELETE's question names its table's triggers), nor does a DDL
  statement's question name the event triggers it fires;
- a read calling an SQL function labelled immutable whose body nests an expression some 60,000 levels deep
  (stored with `check_function_bodies = off`, a setting any role may use, as pg_restore does) kills the
  server process: SafeDB parsed function bodies on the calling thread's stack, which overflows; and one
  with a `BEGIN ATOMIC` body a few thousand levels deep (which PostgreSQL accepts as it is) failed the call
  with Python's RecursionError instead of a classification.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.postgres.conftest import ENDER, FOLDED_ENDER_TABLES, PgDatabase, Victims, database_with, ended
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio


SETUP = (
    ENDER,
    *FOLDED_ENDER_TABLES,
    "CREATE TABLE indexed_expr (id integer, v integer)",
    "INSERT INTO indexed_expr VALUES (1, 1)",
    "CREATE INDEX indexed_expr_folded ON indexed_expr ((id + folded_ender()))",
    # Row security applies to the reader (not the owner): counting the rows runs the policy for each row.
    "CREATE TABLE guarded (id integer)",
    "INSERT INTO guarded VALUES (1)",
    "ALTER TABLE guarded ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY guarded_read ON guarded FOR SELECT USING (ender())",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("TRUNCATE keyed_parted", id="truncate-partition-key"),
        pytest.param("DROP TABLE stats_expr", id="drop-statistics-expression"),
        pytest.param("LOCK TABLE indexed_expr", id="lock-index-expression"),
        pytest.param("VACUUM stats_expr", id="vacuum-statistics-expression"),
        pytest.param("ALTER TABLE indexed_expr ADD COLUMN w integer", id="alter-index-expression"),
        pytest.param("SELECT * FROM indexed_expr FOR UPDATE", id="row-lock-index-expression"),
    ],
)
async def test_the_preview_of_a_table_change_ends_no_session(pg: PgDatabase, victims: Victims, sql: str) -> None:
    """The preview is made before anyone answers: counting the table's rows must not run its stored code."""
    (classification,) = await pg.classifications(sql)
    assert not classification.read_only

    await pg.previews(sql)

    assert ended(victims) == [], f"the preview of {sql!r} ended another session"


@pytest.mark.parametrize("table", ["keyed_parted", "stats_expr", "indexed_expr", "guarded"])
async def test_describing_a_table_ends_no_session(pg: PgDatabase, victims: Victims, table: str) -> None:
    """describe_table runs at once, for anyone: its row count must not run the table's code."""
    database = pg.open()
    try:
        description = await database.describe_table(table)
    finally:
        await database.aclose()

    assert description is not None
    assert ended(victims) == [], f"describing {table} ended another session"


CODE_SETUP = (
    "CREATE TABLE history (id integer)",
    "INSERT INTO history VALUES (1), (2), (3)",
    "CREATE TABLE staging (id integer)",
    "INSERT INTO staging VALUES (1)",
    "CREATE FUNCTION forget_history() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN DELETE FROM history; RETURN NULL; END $$",
    "CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging FOR EACH STATEMENT EXECUTE FUNCTION forget_history()",
    "CREATE TABLE shapes (id integer)",
    "CREATE FUNCTION forget_on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM history; END $$",
    # PostgreSQL parses neither body when it stores it (any role may switch the check off, pg_restore does).
    "SET check_function_bodies = off",
    "CREATE FUNCTION deep() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT " + "+".join(["1"] * 60_000) + " $$",
    "RESET check_function_bodies",
    # Accepted with the check on: a BEGIN ATOMIC body of 3,000 levels is within PostgreSQL's stack limit.
    "CREATE FUNCTION atomic_deep() RETURNS integer LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT "
    + "+".join(["1"] * 3_000)
    + "; END",
)


def _event_trigger(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (
        "CREATE EVENT TRIGGER forget_on_alter ON ddl_command_end WHEN TAG IN ('ALTER TABLE') "
        "EXECUTE FUNCTION forget_on_ddl()",
    )


@pytest.fixture(scope="module")
def pg_code(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, CODE_SETUP, _event_trigger) as database:
        yield database


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        pytest.param("TRUNCATE staging", "staging_truncated", id="truncate-trigger"),
        pytest.param("ALTER TABLE shapes ADD COLUMN w integer", "forget_on_alter", id="event-trigger"),
    ],
)
async def test_the_question_names_the_triggers_an_approval_runs(pg_code: PgDatabase, sql: str, code: str) -> None:
    """Approved, the statement also empties `history` through the trigger; the question must say a trigger runs
    (it shows `Classification.runs`, which the approval then holds to)."""
    (classification,) = await pg_code.classifications(sql)

    assert any(code in name for name in classification.runs), classification.runs


_CLASSIFY_IN_A_PROCESS = """
import anyio, sys
from safedb.db.backend import QueryLimits
from safedb.db.postgres import PostgresDatabase

async def main() -> None:
    database = PostgresDatabase(sys.argv[1], QueryLimits(), writer_dsn=sys.argv[2])
    try:
        await database.classify(sys.argv[3])
    finally:
        await database.aclose()

anyio.run(main)
"""


def test_a_call_of_a_deeply_nested_function_does_not_kill_the_server(pg_code: PgDatabase) -> None:
    """Classified in a process of its own, as the server would classify it (on its event loop's thread)."""
    result = subprocess.run(
        [sys.executable, "-c", _CLASSIFY_IN_A_PROCESS, pg_code.reader_url(), pg_code.writer_url(), "SELECT deep()"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, f"the process ended with {result.returncode}: {result.stderr[-500:]!r}"


async def test_a_call_of_a_deeply_nested_begin_atomic_function_is_classified(pg_code: PgDatabase) -> None:
    (classification,) = await pg_code.classifications("SELECT atomic_deep()")

    assert not classification.read_only  # its body could not be examined
