"""PostgreSQL suite fixtures: one server per session, a fresh database per test module."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from safedb.db.backend import Impact, QueryLimits
from safedb.db.postgres import PostgresDatabase
from safedb.sql.classification import Classification
from tests.conftest_postgres import fresh_database
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

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self.server.connect(self.name) as connection:
            cursor = connection.execute(sql.encode())
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    name = fresh_database(postgres_cluster, SETUP)
    yield PgDatabase(postgres_cluster, name)
    postgres_cluster.drop_database(name)
