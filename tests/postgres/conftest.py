"""PostgreSQL suite fixtures: one server per session, a fresh database per test module."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp.client.client import Client
from mcp.client.session import ElicitationFnT
from mcp.types import CallToolResult, ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from safedb.audit import SqliteAuditStore
from safedb.db.backend import UNBOUND, Bounds, Impact, QueryLimits
from safedb.db.postgres import PostgresDatabase
from safedb.errors import SafeDBError
from safedb.server.app import build_server
from safedb.settings import Policy, Settings, Target
from safedb.sql.classification import Classification
from tests.conftest_postgres import fresh_database
from tests.helpers import Responder, audit_decisions
from tests.postgres_server import READER, WRITER, PostgresServer

SETUP = (
    "CREATE TABLE accounts (id serial PRIMARY KEY, owner text NOT NULL, balance integer NOT NULL DEFAULT 0)",
    "INSERT INTO accounts (owner, balance) VALUES ('ada', 100), ('grace', 200), ('linus', 300)",
    "CREATE TABLE notes (id integer PRIMARY KEY, body text)",
    "INSERT INTO notes VALUES (1, 'DROP TABLE accounts; -- just text'), (2, 'delete me not')",
    "CREATE SEQUENCE tickets",
    "CREATE FUNCTION bump() RETURNS integer LANGUAGE sql VOLATILE AS "
    "$$ INSERT INTO notes VALUES (100, 'bumped') RETURNING id $$",
    "CREATE FUNCTION double_it(integer) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT $1 * 2 $$",
    "CREATE FUNCTION shout(text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$ BEGIN RETURN upper($1); END $$",
    "CREATE VIEW loud_notes AS SELECT id, shout(body) AS body FROM notes",
    "CREATE VIEW calm_notes AS SELECT id, lower(body) AS body FROM notes",
    "CREATE VIEW calm_over_loud AS SELECT * FROM loud_notes",
)


def without_fingerprints(text: str) -> str:
    """`text` (a question's changes) without the fingerprints of user-defined functions' definitions."""
    return re.sub(r"; definition [0-9a-f]{16}", "", text)


@dataclass
class PgDatabase:
    server: PostgresServer
    name: str

    def reader_url(self) -> str:
        return self.server.url(READER, self.name)

    def writer_url(self) -> str:
        return self.server.url(WRITER, self.name)

    def open(self, limits: QueryLimits | None = None) -> PostgresDatabase:
        return PostgresDatabase(self.reader_url(), limits or QueryLimits(), writer_dsn=self.writer_url())

    def run_as_owner(self, *statements: str) -> None:
        """Set up objects as the writer, which owns the database (as an application's owner would)."""
        with self.server.connect(self.name, WRITER) as owner:
            for statement in statements:
                owner.execute(statement.encode())

    async def classifications(self, *statements: str) -> list[Classification]:
        """How SafeDB judges each statement, as a call would."""
        database = self.open()
        try:
            return [await database.classify(sql) for sql in statements]
        finally:
            await database.aclose()

    async def previews(self, *statements: str) -> list[Impact]:
        """The impact preview of each statement, as its question would show it."""
        database = self.open()
        try:
            return [await database.preview(await database.classify(sql)) for sql in statements]
        finally:
            await database.aclose()

    async def asked(self, sql: str) -> tuple[Classification, Impact]:
        """The classification and the impact preview of `sql`, as its question shows them."""
        database = self.open()
        try:
            classification = await database.classify(sql)
            return classification, await database.preview(classification)
        finally:
            await database.aclose()

    async def run_approved(
        self,
        approved: Classification,
        bounds: Bounds = UNBOUND,
    ) -> None:
        """Run a statement as its approval does (held to what its question showed: the dry run's count and its rows
        changed by table, what a DROP takes with it), on a server's own connections."""
        database = self.open()
        try:
            await database.write(approved, bounds)
        finally:
            await database.aclose()

    async def call_execute_query(
        self,
        query: str,
        audit_path: Path,
        responder: ElicitationFnT | None = None,
        mode: str = "auto",
        policy: Policy | None = None,
    ) -> tuple[CallToolResult, list[str]]:
        """One `execute_query` call through SafeDB's server (in process, over this database, under `policy`), and the
        decisions its audit log then holds, oldest first."""
        audit = SqliteAuditStore.open(audit_path)
        database = self.open()
        try:
            settings = Settings(targets=(Target(policy=policy or Policy()),))
            server = build_server(settings, {"default": database}, audit)
            with anyio.fail_after(60):
                async with Client(server, mode=mode, elicitation_callback=responder) as client:
                    result = await client.call_tool("execute_query", {"query": query})
            return result, [decision for decision, _ in audit_decisions(audit)]
        finally:
            await database.aclose()
            audit.close()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self.server.connect(self.name) as connection:
            cursor = connection.execute(sql.encode())
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


@dataclass
class ChangesWhileDeciding(Responder):
    """A person who takes a while to answer the first question, during which the database's owner runs
    `meanwhile`; they accept it, and decline any later question (one that shows what changed)."""

    pg: PgDatabase | None = None
    meanwhile: tuple[str, ...] = ()

    async def __call__(self, context: Any, params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        if self.asked:
            self.asked.append(params)
            return ElicitResult(action="decline")
        if self.pg is not None:
            self.pg.run_as_owner(*self.meanwhile)
        return await super().__call__(context, params)


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def empty_pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    """An empty database for one module, which its tests set up as each needs (a `fresh` fixture of its own)."""
    with database_with(postgres_cluster, ()) as database:
        yield database


Victims = list[psycopg.Connection[tuple[object, ...]]]


@pytest.fixture
def victims(pg: PgDatabase) -> Iterator[Victims]:
    """A session of the reader's role and one of the writer's, which a read could end."""
    urls = [pg.server.url(role, pg.name) + "?application_name=victim" for role in (READER, WRITER)]
    connections = [psycopg.connect(url, autocommit=True) for url in urls]
    try:
        yield connections
    finally:
        for connection in connections:
            connection.close()


def ended(victims: Victims) -> list[int]:
    """The indexes of the victims whose sessions are gone."""
    gone = []
    for index, connection in enumerate(victims):
        try:
            connection.execute(b"SELECT 1")
        except psycopg.OperationalError:
            gone.append(index)
    return gone


async def read_if_read_only(pg: PgDatabase, classification: Classification) -> None:
    """What a call does with a statement SafeDB classifies as read-only: run it at once, on fresh connections
    (the planner loads a relation's index and constraint expressions once per session). An error it then
    reports, such as a permission the reader lacks, comes after planning."""
    if not classification.read_only:
        return
    database = pg.open()
    try:
        await database.read(classification)
    except SafeDBError:
        pass
    finally:
        await database.aclose()


# Ends every session named 'victim' of the role running it (a role may end its own sessions): plainly
# volatile, so SafeDB asks wherever it sees a call of it.
ENDER = (
    "CREATE FUNCTION ender() RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT coalesce(bool_and("
    "pg_terminate_backend(pid, 5000)), true) FROM pg_stat_activity WHERE application_name = 'victim' "
    "AND usename = current_user AND pid <> pg_backend_pid() $$"
)

# Tables whose stored code the planner runs when it plans any statement on them: `folded_ender`, labelled
# immutable (so folded, given constant arguments), ends sessions.
FOLDED_ENDER_TABLES = (
    "CREATE FUNCTION folded_ender() RETURNS integer LANGUAGE plpgsql IMMUTABLE AS "
    "$$ BEGIN PERFORM ender(); RETURN 0; END $$",
    # The relcache folds a partition key's expressions when it loads the key (any plan of the table).
    "CREATE TABLE keyed_parted (id integer, v integer) PARTITION BY RANGE ((id + folded_ender()))",
    "CREATE TABLE keyed_parted_low PARTITION OF keyed_parted FOR VALUES FROM (0) TO (1000)",
    "INSERT INTO keyed_parted VALUES (1, 1)",
    # The planner folds extended statistics expressions when it loads a relation's statistics objects.
    "CREATE TABLE stats_expr (id integer, v integer)",
    "INSERT INTO stats_expr SELECT g, g FROM generate_series(1, 100) AS g",
    "CREATE STATISTICS stats_expr_folded ON (id + folded_ender()) FROM stats_expr",
)


def loopback_server(server: PostgresServer, name: str) -> tuple[str, ...]:
    """Superuser statements for a `postgres_fdw` server named `loopback` that reaches database `name` on
    `server` itself, as the reader: its foreign tables read the reader's view of this database."""
    return (
        "CREATE EXTENSION postgres_fdw",
        "CREATE SERVER loopback FOREIGN DATA WRAPPER postgres_fdw "
        f"OPTIONS (host '127.0.0.1', port '{server.port}', dbname '{name}')",
        f"CREATE USER MAPPING FOR {READER} SERVER loopback "
        f"OPTIONS (user '{READER}', password '{server.passwords[READER]}')",
    )


@contextmanager
def database_with(
    server: PostgresServer,
    setup: Sequence[str],
    superuser_setup: Callable[[PostgresServer, str], Sequence[str]] = lambda server, name: (),
) -> Iterator[PgDatabase]:
    """A fresh database set up with `setup` as the writer, then `superuser_setup(server, name)` as a superuser."""
    name = fresh_database(server, setup)
    with server.connect(name) as admin:
        for statement in superuser_setup(server, name):
            admin.execute(statement.encode())
    yield PgDatabase(server, name)
    server.drop_database(name)


async def assert_asks_without_ending(pg: PgDatabase, victims: Victims, sql: str) -> None:
    """SafeDB asks about `sql`, and running it as a read would if SafeDB did not, ending no session."""
    (classification,) = await pg.classifications(sql)
    await read_if_read_only(pg, classification)

    assert ended(victims) == [], f"{sql!r} ran at once and ended another session"
    assert not classification.read_only
