"""Backend contract fixtures: the same small database on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from safedb.db.backend import Database, QueryLimits
from safedb.db.postgres import PostgresDatabase
from safedb.db.sqlite import SqliteDatabase
from tests.conftest_postgres import fresh_database
from tests.postgres_server import READER, WRITER, PostgresServer

ITEM_COUNT = 30

# Portable SQL: the same statements build the fixture on both engines.
SETUP = (
    "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL, qty INTEGER NOT NULL CHECK (qty >= 0))",
    "INSERT INTO items (id, label, qty) SELECT n, 'item ' || n, n FROM "
    f"(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {ITEM_COUNT}) SELECT n FROM s) AS s",
    "CREATE VIEW item_labels AS SELECT id, label FROM items",
)

SLOW_READ = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"
)


@dataclass
class Backend:
    """A database under test, its engine name, and a way to look at it through a connection of its own."""

    engine: str
    open: Callable[[QueryLimits], Database]
    query: Callable[[str], list[tuple[Any, ...]]]
    opened: list[Database] = field(default_factory=list)

    def database(self, limits: QueryLimits | None = None) -> Database:
        database = self.open(limits or QueryLimits())
        self.opened.append(database)
        return database


def _sqlite_backend(path: Path) -> Backend:
    connection = sqlite3.connect(path)
    try:
        for statement in SETUP:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()

    def query(sql: str) -> list[tuple[Any, ...]]:
        look = sqlite3.connect(path)
        try:
            return look.execute(sql).fetchall()
        finally:
            look.close()

    return Backend("sqlite", lambda limits: SqliteDatabase(path, limits), query)


def _postgres_backend(server: PostgresServer) -> Backend:
    name = fresh_database(server, SETUP)

    def query(sql: str) -> list[tuple[Any, ...]]:
        with server.connect(name) as look:
            return [tuple(row) for row in look.execute(sql.encode()).fetchall()]

    def open_database(limits: QueryLimits) -> Database:
        return PostgresDatabase(server.url(READER, name), limits, writer_dsn=server.url(WRITER, name))

    return Backend("postgres", open_database, query)


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        made = _sqlite_backend(tmp_path / "contract.db")
    else:
        made = _postgres_backend(request.getfixturevalue("postgres_cluster"))
    try:
        yield made
    finally:
        for database in made.opened:
            await database.aclose()
