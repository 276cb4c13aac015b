"""`safedb serve` on PostgreSQL, the database changing while the person decides, both protocol eras.

The question's dry run counted the rows of a change that a rollback undoes entirely (no trigger, rule, policy,
untrusted default...). Someone then adds such code to the table before the answer comes back: the approved
run must not run it unseen. Each test checks the tool result, the database and the audit log.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_types import ElicitResult

from bench.servers import ServerProcess, serving_process
from safedb.audit import AuditQuery, open_audit_store
from safedb.errors import ChangedSinceQuestion
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]


@contextmanager
def safedb_on(pg: PgDatabase, audit_db: str, *extra: str) -> Iterator[ServerProcess]:
    command = [
        sys.executable, "-m", "safedb", "serve", "--port", "0", "--host", "127.0.0.1",
        "--database", pg.reader_url(), "--writer-database", pg.writer_url(), "--audit-db", audit_db, *extra,
    ]  # fmt: skip
    with serving_process(command, start_timeout=60) as server:
        yield server


async def call_while_changing(pg: PgDatabase, audit_db: str, mode: str, sql: str, responder: Responder) -> Any:
    """Call execute_query with `sql` on a fresh `safedb serve` process, answered by `responder`; the tool result."""
    with safedb_on(pg, audit_db) as server:
        async with Client(server.url, mode=mode, elicitation_callback=responder) as client:
            return await client.call_tool("execute_query", {"query": sql})


def decisions(audit_db: str, sql: str) -> list[str]:
    with open_audit_store(audit_db, readonly=True) as store:
        return [str(r.decision) for r in store.records(AuditQuery(limit=None)) if r.sql == sql]


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


class ChangingResponder(Responder):
    """Accepts the first question after running `statements` as the database's owner (someone else, while the
    person decides); declines any later one (on 2026-07-28 a changed classification is a new question)."""

    def __init__(self, pg: PgDatabase, *statements: str) -> None:
        super().__init__()
        self.pg = pg
        self.statements = statements

    async def __call__(self, context: Any, params: Any) -> Any:
        if self.asked:
            self.asked.append(params)
            return ElicitResult(action="decline")
        self.pg.run_as_owner(*self.statements)
        return await super().__call__(context, params)


def fresh_tables(pg: PgDatabase, tag: str) -> tuple[str, str]:
    """A table with three rows and an empty side table, named by `tag` so tests stay apart."""
    table, side = f"ledger_{tag}", f"side_{tag}"
    pg.run_as_owner(
        f"CREATE TABLE {table} (id integer PRIMARY KEY, amount integer NOT NULL DEFAULT 0)",
        f"INSERT INTO {table} VALUES (1, 10), (2, 20), (3, 30)",
        f"CREATE TABLE {side} (note text)",
        f"GRANT SELECT ON {table}, {side} TO safedb_reader",
    )
    return table, side


def side_writer(name: str, side: str) -> str:
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN INSERT INTO {side} VALUES ('ran unseen'); RETURN NULL; END $$"
    )


def assert_stopped_or_asked_anew(result: Any, responder: ChangingResponder, audit_db: str, sql: str) -> None:
    """The approved run was stopped, saying why; or (2026-07-28, where the retry classifies the statement again)
    the statement now classifies differently, so the person was asked anew, and declined."""
    if len(responder.asked) == 1:
        assert result.is_error, text(result)
        assert "The database changed since the question" in text(result)
        assert "Traceback" not in text(result)
        assert decisions(audit_db, sql) == ["requested", "accepted", "failed"]
    else:
        assert "declined" in text(result)
        assert decisions(audit_db, sql) == ["requested", "requested", "declined"]


CHANGES = {
    "trigger": lambda t, s: (
        side_writer(f"{t}_fn", s),
        f"CREATE TRIGGER {t}_trg AFTER UPDATE ON {t} FOR EACH ROW EXECUTE FUNCTION {t}_fn()",
    ),
    "rule": lambda t, s: (f"CREATE RULE {t}_also AS ON UPDATE TO {t} DO ALSO INSERT INTO {s} VALUES ('ran unseen')",),
    "row_security": lambda t, s: (
        f"CREATE FUNCTION {t}_pol(integer) RETURNS boolean LANGUAGE plpgsql AS "
        f"$$ BEGIN INSERT INTO {s} VALUES ('ran unseen'); RETURN true; END $$",
        f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY {t}_p ON {t} USING ({t}_pol(id))",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_code_added_to_the_table_while_deciding_does_not_run(
    pg: PgDatabase, tmp_path: Path, mode: str, change: str
) -> None:
    table, side = fresh_tables(pg, f"{change}_{mode}")
    sql = f"UPDATE {table} SET amount = amount + 1 WHERE id = 1"
    audit_db = str(tmp_path / "audit.db")
    responder = ChangingResponder(pg, *CHANGES[change](table, side))
    result = await call_while_changing(pg, audit_db, mode, sql, responder)
    assert "An approval holds for exactly 1 row" in responder.asked[0].message
    assert pg.rows(f"SELECT amount FROM {table} WHERE id = 1") == [(10,)]
    assert pg.rows(f"SELECT count(*) FROM {side}") == [(0,)]
    assert_stopped_or_asked_anew(result, responder, audit_db, sql)


@pytest.mark.parametrize("mode", MODES)
async def test_a_default_changed_to_a_writing_function_while_deciding_does_not_run(
    pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    table, side = fresh_tables(pg, f"default_{mode}")
    sql = f"INSERT INTO {table} (id) VALUES (4)"
    audit_db = str(tmp_path / "audit.db")
    responder = ChangingResponder(
        pg,
        f"CREATE FUNCTION {table}_amount() RETURNS integer LANGUAGE plpgsql AS "
        f"$$ BEGIN INSERT INTO {side} VALUES ('ran unseen'); RETURN 5; END $$",
        f"ALTER TABLE {table} ALTER COLUMN amount SET DEFAULT {table}_amount()",
    )
    result = await call_while_changing(pg, audit_db, mode, sql, responder)
    assert "An approval holds for exactly 1 row" in responder.asked[0].message
    assert pg.rows(f"SELECT count(*) FROM {table} WHERE id = 4") == [(0,)]
    assert pg.rows(f"SELECT count(*) FROM {side}") == [(0,)]
    assert_stopped_or_asked_anew(result, responder, audit_db, sql)


@pytest.mark.parametrize("mode", MODES)
async def test_a_table_replaced_by_a_view_while_deciding_is_not_written_through(
    pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    table, side = fresh_tables(pg, f"view_{mode}")
    sql = f"UPDATE {table} SET amount = 0 WHERE id = 2"
    audit_db = str(tmp_path / "audit.db")
    responder = ChangingResponder(
        pg,
        f"ALTER TABLE {table} RENAME TO {table}_old",
        f"CREATE VIEW {table} AS SELECT * FROM {table}_old",
        side_writer(f"{table}_fn", side).replace("RETURN NULL", "RETURN NEW"),
        f"CREATE TRIGGER {table}_trg INSTEAD OF UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION {table}_fn()",
    )
    result = await call_while_changing(pg, audit_db, mode, sql, responder)
    assert pg.rows(f"SELECT amount FROM {table}_old WHERE id = 2") == [(20,)]
    assert pg.rows(f"SELECT count(*) FROM {side}") == [(0,)]
    assert_stopped_or_asked_anew(result, responder, audit_db, sql)


@pytest.mark.parametrize("mode", MODES)
async def test_a_table_that_comes_first_in_the_search_path_while_deciding_is_not_the_one_changed(
    pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """The search path reaches schema `early_<mode>` before `public`; the question's dry run counted the row of
    public's table. A table of the same name then appears in the earlier schema, with a matching row."""
    schema, table = f"early_{mode}", f"shadowed_{mode}"
    pg.run_as_owner(
        f"CREATE SCHEMA {schema}",
        f"GRANT USAGE ON SCHEMA {schema} TO safedb_reader",
        f"ALTER DATABASE {pg.name} SET search_path = {schema}, public",
        f"CREATE TABLE public.{table} (id integer PRIMARY KEY)",
        f"INSERT INTO public.{table} VALUES (1)",
        f"GRANT SELECT ON public.{table} TO safedb_reader",
    )
    sql = f"DELETE FROM {table} WHERE id = 1"
    audit_db = str(tmp_path / "audit.db")
    responder = ChangingResponder(
        pg, f"CREATE TABLE {schema}.{table} (id integer PRIMARY KEY)", f"INSERT INTO {schema}.{table} VALUES (1)"
    )
    try:
        result = await call_while_changing(pg, audit_db, mode, sql, responder)
    finally:
        pg.run_as_owner(f"ALTER DATABASE {pg.name} RESET search_path")
    assert "An approval holds for exactly 1 row" in responder.asked[0].message
    assert pg.rows(f"SELECT count(*) FROM {schema}.{table}") == [(1,)]
    assert_stopped_or_asked_anew(result, responder, audit_db, sql)


async def test_a_table_that_takes_the_name_while_the_approved_statement_runs_is_rolled_back(pg: PgDatabase) -> None:
    """The names are checked just before the approved statement; a table of the same name created after that check
    (here by the statement's own trigger, as another session could between the two) took the name all the same.
    They are checked again before the transaction commits, which is then rolled back."""
    schema, table = "early_race", "raced"
    pg.run_as_owner(
        f"CREATE SCHEMA {schema}",
        f"GRANT USAGE ON SCHEMA {schema} TO safedb_reader",
        f"ALTER DATABASE {pg.name} SET search_path = {schema}, public",
        f"CREATE TABLE public.{table} (id integer PRIMARY KEY)",
        f"INSERT INTO public.{table} VALUES (1), (2)",
        f"GRANT SELECT ON public.{table} TO safedb_reader",
        f"CREATE FUNCTION {table}_shadow() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN CREATE TABLE {schema}.{table} (id integer); RETURN OLD; END $$",
        f"CREATE TRIGGER {table}_shadow BEFORE DELETE ON public.{table} FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {table}_shadow()",
    )
    database = pg.open()
    try:
        approved = await database.classify(f"DELETE FROM {table} WHERE id = 1")
        (oid,) = pg.rows(f"SELECT 'public.{table}'::regclass::oid")[0]
        assert approved.resolved == ((f'"{table}"', f"public.{table} (oid {oid})"),)
        with pytest.raises(
            ChangedSinceQuestion,
            match=rf'"{table}" now means {schema}.{table} \(oid \d+\), not public.{table} \(oid {oid}\)',
        ):
            await database.write(approved)
    finally:
        await database.aclose()
        pg.run_as_owner(f"ALTER DATABASE {pg.name} RESET search_path")
    assert pg.rows(f"SELECT count(*) FROM public.{table}") == [(2,)]
    assert pg.rows(f"SELECT to_regclass('{schema}.{table}') IS NULL") == [(True,)]
