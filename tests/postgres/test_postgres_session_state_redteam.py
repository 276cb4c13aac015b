"""Red team (2026-11-29): what approved changes leave behind for the sessions SafeDB keeps pooled afterwards.

Both pools search the schemas the reader's search path reached when they opened, so that a name means the same
table to the checks (made as the reader) and to the dry run and the approved statement (run as the writer). A
privilege changed while SafeDB runs, such as an approved `REVOKE USAGE ON SCHEMA app FROM <reader>`, made one role
skip a schema on that path which the other still searched: the question showed `public.t` (no triggers, so a dry
run), and the dry run, made before anyone answered, deleted from `app.t` and ran its trigger.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.types import CallToolResult, ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from safedb.audit import SqliteAuditStore
from safedb.errors import QueryFailed
from safedb.server.app import build_server
from safedb.settings import Settings
from tests.postgres.conftest import PgDatabase, database_with
from tests.postgres_server import READER, WRITER, PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE TABLE t (id integer PRIMARY KEY, v text)",
    "INSERT INTO t VALUES (1, 'public'), (2, 'public')",
    "CREATE SCHEMA app",
    f"GRANT USAGE ON SCHEMA app TO {READER}",
    "CREATE SEQUENCE app.fired",
    "CREATE TABLE app.t (id integer PRIMARY KEY, v text)",
    "INSERT INTO app.t VALUES (1, 'app'), (2, 'app')",
    # Moves a sequence, which no rollback gives back: a dry run of a DELETE from app.t shows.
    "CREATE FUNCTION app.fire() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('app.fired'); RETURN old; END $$",
    "CREATE TRIGGER fire BEFORE DELETE ON app.t FOR EACH ROW EXECUTE FUNCTION app.fire()",
    "CREATE SEQUENCE fired",
    "CREATE FUNCTION fire() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('public.fired'); RETURN old; END $$",
    f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {READER}",
    f"GRANT SELECT ON ALL SEQUENCES IN SCHEMA app TO {READER}",
)


def _reader_searches_app_first(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (f'ALTER ROLE {READER} IN DATABASE "{name}" SET search_path = app, public',)


@pytest.fixture
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP, _reader_searches_app_first) as database:
        yield database


@dataclass
class Answers:
    """Accepts the questions whose text holds `accept`, declines the others; remembers every question."""

    accept: str
    asked: list[str] = field(default_factory=list)

    async def __call__(self, context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        self.asked.append(params.message)
        if self.accept in params.message:
            return ElicitResult(
                action="accept",
                content={"confirm": True, "justification": "tighten access", "environment": "Development"},
            )
        return ElicitResult(action="decline")


async def _calls(pg: PgDatabase, audit_path: Path, answers: Answers, *queries: str) -> list[CallToolResult]:
    """`queries` through one SafeDB server (one set of pools, as `safedb serve` keeps), one after the other."""
    audit = SqliteAuditStore.open(audit_path)
    database = pg.open()
    try:
        server = build_server(Settings(), {"default": database}, audit)
        with anyio.fail_after(120):
            async with Client(server, elicitation_callback=answers) as client:
                return [await client.call_tool("execute_query", {"query": query}) for query in queries]
    finally:
        await database.aclose()
        audit.close()


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_a_schema_the_reader_loses_meanwhile_makes_no_dry_run_of_another_table(
    pg: PgDatabase, tmp_path: Path
) -> None:
    answers = Answers(accept="REVOKE")
    _, revoked, deleted = await _calls(
        pg,
        tmp_path / "audit.db",
        answers,
        "SELECT count(*) FROM t",  # opens the pools while the reader may use app
        f"REVOKE USAGE ON SCHEMA app FROM {READER}",
        "DELETE FROM t WHERE id = 1",
    )

    assert not revoked.is_error, _text(revoked)
    # The trigger of app.t never ran: no dry run of app.t was made for a question about public.t.
    assert pg.rows("SELECT is_called FROM app.fired") == [(False,)]
    assert pg.rows("SELECT count(*) FROM app.t") == [(2,)]
    assert pg.rows("SELECT count(*) FROM public.t") == [(2,)]
    assert deleted.is_error
    assert "USAGE" in _text(deleted)
    assert not any("measured by a dry run" in question for question in answers.asked)


async def test_a_schema_the_writer_loses_meanwhile_makes_no_dry_run_of_another_table(
    pg: PgDatabase, tmp_path: Path
) -> None:
    """The other way round: the reader finds app.t (no triggers of its own here), the writer would skip app and
    delete from public.t, whose trigger the question never showed."""
    pg.run_as_owner(
        "DROP TRIGGER fire ON app.t",
        "CREATE TRIGGER fire BEFORE DELETE ON public.t FOR EACH ROW EXECUTE FUNCTION public.fire()",
    )
    with pg.server.connect(pg.name) as admin:
        admin.execute(b"ALTER SCHEMA app OWNER TO postgres")
        admin.execute(f"GRANT USAGE ON SCHEMA app TO {READER}, {WRITER}".encode())
    database = pg.open()
    try:
        await database.list_tables()  # opens the pools while the writer may use app
        with pg.server.connect(pg.name) as admin:
            admin.execute(f"REVOKE USAGE ON SCHEMA app FROM {WRITER}".encode())
        classification = await database.classify("DELETE FROM t WHERE id = 1")
        with pytest.raises(QueryFailed, match=f"{WRITER} may no longer use schema app"):
            await database.preview(classification)
    finally:
        await database.aclose()

    assert pg.rows("SELECT is_called FROM public.fired") == [(False,)]
    assert pg.rows("SELECT count(*) FROM public.t") == [(2,)]


async def test_a_schema_the_writer_loses_meanwhile_plans_no_other_table(pg: PgDatabase) -> None:
    """app.t has a trigger, so the question shows the planner's estimate, planned as the writer: of public.t
    (whose stored code planning may run), had the writer skipped app."""
    with pg.server.connect(pg.name) as admin:
        admin.execute(b"ALTER SCHEMA app OWNER TO postgres")
        admin.execute(f"GRANT USAGE ON SCHEMA app TO {READER}, {WRITER}".encode())
    database = pg.open()
    try:
        await database.list_tables()
        with pg.server.connect(pg.name) as admin:
            admin.execute(f"REVOKE USAGE ON SCHEMA app FROM {WRITER}".encode())
        classification = await database.classify("DELETE FROM t WHERE id = 1")
        with pytest.raises(QueryFailed, match=f"{WRITER} may no longer use schema app"):
            await database.preview(classification)
    finally:
        await database.aclose()

    assert pg.rows("SELECT is_called FROM app.fired") == [(False,)]


# The reader's search path as a role setting (`ALTER ROLE ... SET search_path`, approved or not) takes effect in the
# sessions SafeDB opens next. One that names pg_catalog after another schema put a table or view there ahead of the
# system catalogs that SafeDB's own catalog queries name without a schema: `public.pg_trigger` hid a trigger from
# the question, and the dry run, made before anyone answered, ran it.
CATALOG_LAST_SETUP = (
    "CREATE TABLE t2 (id integer)",
    "INSERT INTO t2 VALUES (1)",
    "CREATE SEQUENCE fired",
    "CREATE FUNCTION fire() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('public.fired'); RETURN old; END $$",
    "CREATE TRIGGER fire BEFORE DELETE ON t2 FOR EACH ROW EXECUTE FUNCTION fire()",
    "CREATE VIEW public.pg_trigger AS SELECT * FROM pg_catalog.pg_trigger WHERE tgname <> 'fire'",
)


def _reader_searches_pg_catalog_last(server: PostgresServer, name: str) -> tuple[str, ...]:
    return (f'ALTER ROLE {READER} IN DATABASE "{name}" SET search_path = public, pg_catalog',)


@pytest.fixture
def catalog_last(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, CATALOG_LAST_SETUP, _reader_searches_pg_catalog_last) as database:
        yield database


async def test_a_search_path_naming_pg_catalog_last_hides_no_trigger(catalog_last: PgDatabase, tmp_path: Path) -> None:
    answers = Answers(accept="nothing")
    (deleted,) = await _calls(catalog_last, tmp_path / "audit.db", answers, "DELETE FROM t2")

    assert catalog_last.rows("SELECT is_called FROM fired") == [(False,)]
    assert catalog_last.rows("SELECT count(*) FROM t2") == [(1,)]
    assert "declined" in _text(deleted)
    (question,) = answers.asked
    assert "fire" in question
    assert "measured by a dry run" not in question
