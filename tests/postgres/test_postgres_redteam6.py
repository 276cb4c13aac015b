"""Red team, sixth pass: code an approved statement runs that its question did not show, and a tool that never
asks giving up where an estimate would do.

- a trigger, rule or event trigger added (or enabled) while a person decides about a TRUNCATE, a DDL statement
  or a data change whose question showed no dry run's count ran when the statement was approved: only a counted
  data change was checked again before it ran;
- `REFRESH MATERIALIZED VIEW`, `ANALYZE`, `VACUUM FULL`, `CLUSTER`, `REINDEX`, `CREATE INDEX` and `ALTER TABLE`
  run stored code when approved (a materialized view's query, index expressions, statistics expressions, a
  partition key; an ALTER TABLE's own USING, default and check expressions, for every row), which their
  question did not name, nor judge as a read of those relations would be (a server file read is refused);
- `describe_table` of a table it may not count (counting would run the table's code), or cannot count in time,
  gave no row count, or failed the call with a timeout, where the planner's estimate was at hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp.client.client import Client
from mcp.types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from safedb.audit import SqliteAuditStore
from safedb.db.backend import QueryLimits
from safedb.errors import ChangedSinceQuestion, DeniedByPolicy
from safedb.server.app import build_server
from safedb.settings import Settings
from safedb.sql.classification import ChangeKind
from tests.helpers import Responder
from tests.postgres.conftest import ENDER, FOLDED_ENDER_TABLES, PgDatabase, database_with
from tests.postgres_server import WRITER, PostgresServer

pytestmark = pytest.mark.anyio


SETUP = (
    ENDER,
    *FOLDED_ENDER_TABLES,
    "ANALYZE stats_expr",
    "CREATE TABLE history (id integer)",
    "CREATE FUNCTION forget_history() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN DELETE FROM history; RETURN NULL; END $$",
    "CREATE FUNCTION noted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN old; END $$",
    "CREATE FUNCTION forget_on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM history; END $$",
    # Stored code a maintenance statement runs: a materialized view's query, an index expression.
    "CREATE TABLE base (id integer)",
    "INSERT INTO base VALUES (1)",
    "CREATE MATERIALIZED VIEW ending AS SELECT id, ender() AS e FROM base WITH NO DATA",
    "CREATE TABLE indexed (id integer)",
    "INSERT INTO indexed VALUES (1)",
    "CREATE INDEX indexed_folded ON indexed ((id + folded_ender()))",
    # Created without data, so not run: reading a server file is not for the writer (nor anyone through SafeDB).
    "CREATE MATERIALIZED VIEW filed AS SELECT pg_read_file('postgresql.conf') AS text WITH NO DATA",
    "CREATE TABLE loose (id integer, v integer)",
    "CREATE TABLE big (id integer)",
    "INSERT INTO big SELECT g FROM generate_series(1, 5000) AS g",
    "ANALYZE big",
)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


def _fill(pg: PgDatabase, table: str) -> None:
    pg.run_as_owner(
        f"DROP TABLE IF EXISTS {table} CASCADE",
        f"CREATE TABLE {table} (id integer)",
        f"INSERT INTO {table} VALUES (1), (2)",
        "DELETE FROM history",
        "INSERT INTO history VALUES (1), (2), (3)",
    )


async def test_a_truncate_trigger_added_after_the_question_does_not_run(pg: PgDatabase) -> None:
    _fill(pg, "staging")
    added = "CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging EXECUTE FUNCTION forget_history()"

    (shown,) = await pg.classifications("TRUNCATE staging")
    pg.run_as_owner(added)  # while a person decides

    with pytest.raises(ChangedSinceQuestion, match="staging_truncated"):
        await pg.run_approved(shown)

    assert pg.rows("SELECT count(*) FROM staging") == [(2,)]
    assert pg.rows("SELECT count(*) FROM history") == [(3,)]


async def test_a_truncate_trigger_enabled_after_the_question_does_not_run(pg: PgDatabase) -> None:
    _fill(pg, "staging")
    pg.run_as_owner(
        "CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging EXECUTE FUNCTION forget_history()",
        "ALTER TABLE staging DISABLE TRIGGER staging_truncated",
    )

    (shown,) = await pg.classifications("TRUNCATE staging")
    pg.run_as_owner("ALTER TABLE staging ENABLE TRIGGER staging_truncated")

    with pytest.raises(ChangedSinceQuestion, match="staging_truncated"):
        await pg.run_approved(shown)

    assert pg.rows("SELECT count(*) FROM history") == [(3,)]


async def test_a_truncate_trigger_the_question_named_runs(pg: PgDatabase) -> None:
    """The approval covers the trigger it named: the statement runs, and its trigger with it."""
    _fill(pg, "staging")
    pg.run_as_owner("CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging EXECUTE FUNCTION forget_history()")

    (shown,) = await pg.classifications("TRUNCATE staging")
    await pg.run_approved(shown)

    assert [name.split(" (")[0] for name in shown.runs] == ["trigger staging_truncated on staging"]
    assert pg.rows("SELECT count(*) FROM staging") == [(0,)]
    assert pg.rows("SELECT count(*) FROM history") == [(0,)]


async def test_a_truncate_trigger_whose_function_is_replaced_after_the_question_does_not_run(pg: PgDatabase) -> None:
    """The question named the trigger and the function it calls: another body under that name is other code."""
    _fill(pg, "staging")
    pg.run_as_owner(
        "CREATE FUNCTION keep_history() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
        "CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging EXECUTE FUNCTION keep_history()",
    )
    (shown,) = await pg.classifications("TRUNCATE staging")
    pg.run_as_owner(
        "CREATE OR REPLACE FUNCTION keep_history() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN DELETE FROM history; RETURN NULL; END $$"
    )

    try:
        with pytest.raises(ChangedSinceQuestion, match="keep_history"):
            await pg.run_approved(shown)
    finally:
        pg.run_as_owner("DROP FUNCTION keep_history() CASCADE")

    assert pg.rows("SELECT count(*) FROM staging") == [(2,)]
    assert pg.rows("SELECT count(*) FROM history") == [(3,)]


async def test_an_event_trigger_added_after_a_ddl_question_does_not_run(pg: PgDatabase) -> None:
    _fill(pg, "shapes")
    added = (
        "CREATE EVENT TRIGGER forget_on_alter ON ddl_command_end WHEN TAG IN ('ALTER TABLE') "
        "EXECUTE FUNCTION forget_on_ddl()"
    )
    (shown,) = await pg.classifications("ALTER TABLE shapes ADD COLUMN w integer")
    with pg.server.connect(pg.name) as admin:  # only a superuser may create an event trigger
        admin.execute(added.encode())
    try:
        with pytest.raises(ChangedSinceQuestion, match="forget_on_alter"):
            await pg.run_approved(shown)
    finally:
        with pg.server.connect(pg.name) as admin:
            admin.execute(b"DROP EVENT TRIGGER forget_on_alter")

    assert pg.rows("SELECT count(*) FROM history") == [(3,)]
    assert pg.rows("SELECT count(*) FROM information_schema.columns WHERE table_name = 'shapes'") == [(1,)]


@pytest.mark.parametrize(
    "added",
    [
        pytest.param(
            "CREATE TRIGGER counted_deleted AFTER DELETE ON counted EXECUTE FUNCTION forget_history()", id="trigger"
        ),
        pytest.param("CREATE RULE counted_forget AS ON DELETE TO counted DO ALSO DELETE FROM history", id="rule"),
    ],
)
async def test_code_added_after_an_uncounted_data_change_question_does_not_run(pg: PgDatabase, added: str) -> None:
    """A table with a trigger gets the planner's estimate, not a dry run's count: the approval holds for no
    count, but still only for the triggers and rules it named."""
    _fill(pg, "counted")
    pg.run_as_owner("CREATE TRIGGER counted_noted BEFORE DELETE ON counted FOR EACH ROW EXECUTE FUNCTION noted()")

    (shown,) = await pg.classifications("DELETE FROM counted")
    pg.run_as_owner(added)

    with pytest.raises(ChangedSinceQuestion, match=r"counted_(deleted|forget) on counted \(.*\) would run"):
        await pg.run_approved(shown)

    assert [name.split(" (")[0] for name in shown.runs] == ["trigger counted_noted on counted"]

    assert pg.rows("SELECT count(*) FROM counted") == [(2,)]
    assert pg.rows("SELECT count(*) FROM history") == [(3,)]


@pytest.mark.parametrize(
    ("sql", "function", "via"),
    [
        pytest.param("REFRESH MATERIALIZED VIEW ending", "ender", "ending", id="refresh-view-query"),
        pytest.param("ANALYZE indexed", "folded_ender", "indexed", id="analyze-index-expression"),
        pytest.param("ANALYZE stats_expr", "folded_ender", "stats_expr", id="analyze-statistics-expression"),
        pytest.param("VACUUM (ANALYZE) stats_expr", "folded_ender", "stats_expr", id="vacuum-analyze"),
        pytest.param("VACUUM FULL indexed", "folded_ender", "indexed", id="vacuum-full-index-expression"),
        pytest.param("CLUSTER indexed USING indexed_folded", "folded_ender", "indexed", id="cluster"),
        pytest.param("REINDEX TABLE indexed", "folded_ender", "indexed", id="reindex-table"),
        pytest.param("REINDEX INDEX indexed_folded", "folded_ender", "indexed_folded", id="reindex-index"),
        pytest.param("VACUUM FULL", "folded_ender", "indexed", id="vacuum-full-everything"),
        pytest.param("CREATE INDEX ON base ((id + folded_ender()))", "folded_ender", None, id="create-index"),
        pytest.param("ALTER TABLE indexed ALTER COLUMN id TYPE bigint", "folded_ender", "indexed", id="alter-type"),
        pytest.param(
            "ALTER TABLE base ALTER COLUMN id TYPE bigint USING id + folded_ender()", "folded_ender", None, id="using"
        ),
        pytest.param(
            "ALTER TABLE base ADD CONSTRAINT positive CHECK (id + folded_ender() >= 0)",
            "folded_ender",
            None,
            id="check",
        ),
        pytest.param("ALTER TABLE base ADD COLUMN w integer DEFAULT ender()::integer", "ender", None, id="add-column"),
        pytest.param(
            "ALTER TABLE keyed_parted ATTACH PARTITION loose FOR VALUES FROM (1000) TO (2000)",
            "folded_ender",
            "keyed_parted",
            id="attach-partition-key",
        ),
    ],
)
async def test_the_question_of_a_maintenance_statement_names_the_code_it_runs(
    pg: PgDatabase, sql: str, function: str, via: str | None
) -> None:
    (classification,) = await pg.classifications(sql)

    calls = [c for c in classification.changes if c.kind is ChangeKind.FUNCTION_CALL]
    assert any(c.target.name == function and c.via == via for c in calls), classification.changes


async def test_a_plain_vacuum_runs_no_stored_code(pg: PgDatabase) -> None:
    """It removes dead rows by their place: nothing to name."""
    (classification,) = await pg.classifications("VACUUM indexed")

    assert classification.kinds == (ChangeKind.VACUUM,)


async def test_refreshing_a_view_that_reads_a_server_file_is_refused(pg: PgDatabase) -> None:
    """A read of it would be refused; so is refreshing it, whoever approves."""
    with pytest.raises(DeniedByPolicy, match="pg_read_file"):
        await pg.classifications("REFRESH MATERIALIZED VIEW filed")


async def test_describing_a_table_it_may_not_count_gives_the_estimate(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        description = await database.describe_table("stats_expr")
    finally:
        await database.aclose()

    assert description is not None
    assert (description.row_count, description.row_count_estimated) == (100, True)


async def test_describing_a_table_it_cannot_count_in_time_gives_the_estimate(pg: PgDatabase) -> None:
    """Here a session holds the table locked, so counting waits past the time limit, as on a huge table."""
    database = pg.open(QueryLimits(statement_timeout=1.0))
    holder = psycopg.connect(pg.server.url(WRITER, pg.name))
    try:
        holder.execute(b"LOCK TABLE big IN ACCESS EXCLUSIVE MODE")
        description = await database.describe_table("big")
    finally:
        holder.close()
        await database.aclose()

    assert description is not None
    assert (description.row_count, description.row_count_estimated) == (5000, True)


async def test_describing_a_table_it_can_count_counts(pg: PgDatabase) -> None:
    database = pg.open()
    try:
        description = await database.describe_table("big")
    finally:
        await database.aclose()

    assert description is not None
    assert (description.row_count, description.row_count_estimated) == (5000, False)


@dataclass
class _WouldDeclineATrigger(Responder):
    """A person who takes a while to answer, during which the table's owner adds a TRUNCATE trigger; they accept
    a question that names no trigger, and would decline one that named it."""

    pg: PgDatabase | None = None

    async def __call__(self, context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        if self.pg is not None and not self.asked:
            self.pg.run_as_owner(
                "CREATE TRIGGER staging_truncated AFTER TRUNCATE ON staging EXECUTE FUNCTION forget_history()"
            )
        if "staging_truncated" in params.message:
            self.asked.append(params)
            return ElicitResult(action="decline")
        return await super().__call__(context, params)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_server_a_trigger_added_while_asking_does_not_run(
    pg: PgDatabase, tmp_path: Path, mode: str
) -> None:
    """Refused when the approved statement runs (legacy era), or asked again, naming the trigger (a retry is
    classified anew: its question no longer matches)."""
    _fill(pg, "staging")
    responder = _WouldDeclineATrigger(pg=pg)
    result, decisions = await pg.call_execute_query("TRUNCATE staging", tmp_path / "audit.db", responder, mode)

    assert pg.rows("SELECT count(*) FROM history") == [(3,)]
    assert pg.rows("SELECT count(*) FROM staging") == [(2,)]
    assert responder.asked, "no question was asked"
    assert "executed" not in decisions, decisions
    assert result.is_error or "staging_truncated" in responder.asked[-1].message, result


async def test_through_the_server_describe_table_labels_an_estimate(pg: PgDatabase, tmp_path: Path) -> None:
    audit = SqliteAuditStore.open(tmp_path / "audit.db")
    database = pg.open()
    try:
        server = build_server(Settings(), {"default": database}, audit)
        with anyio.fail_after(60):
            async with Client(server) as client:
                described = await client.call_tool("describe_table", {"name": "stats_expr"})
    finally:
        await database.aclose()
        audit.close()

    assert described.structured_content is not None
    assert described.structured_content["row_count"] == 100
    assert described.structured_content["row_count_estimated"] is True
    assert "about 100 rows (the planner's estimate" in "".join(getattr(b, "text", "") for b in described.content)


def _writer_loopback(server: PostgresServer, name: str) -> tuple[str, ...]:
    """A foreign table that reaches `landing` in this database as the writer."""
    return (
        "CREATE EXTENSION postgres_fdw",
        "CREATE SERVER loopback FOREIGN DATA WRAPPER postgres_fdw "
        f"OPTIONS (host '127.0.0.1', port '{server.port}', dbname '{name}')",
        f"CREATE USER MAPPING FOR {WRITER} SERVER loopback "
        f"OPTIONS (user '{WRITER}', password '{server.passwords[WRITER]}')",
        "CREATE FOREIGN TABLE remote_landing (id integer) SERVER loopback OPTIONS (table_name 'landing')",
        f"ALTER FOREIGN TABLE remote_landing OWNER TO {WRITER}",
    )


@pytest.fixture(scope="module")
def pg_remote(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, ("CREATE TABLE landing (id integer)",), _writer_loopback) as database:
        yield database


async def test_an_approved_change_of_a_foreign_table_runs(pg_remote: PgDatabase) -> None:
    """PostgreSQL locks no foreign table with LOCK TABLE: the check before the run must not try to."""
    (shown,) = await pg_remote.classifications("INSERT INTO remote_landing VALUES (1)")

    await pg_remote.run_approved(shown)

    assert pg_remote.rows("SELECT id FROM landing") == [(1,)]
