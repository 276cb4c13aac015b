"""The authorizer an approved statement runs under: its own actions and plain reads, nothing else."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.sqlite.backend import approved_only
from safedb.db.sqlite.connections import open_inspector
from safedb.db.sqlite.inspector import inspect_statement, schema_facts
from safedb.sql.classification import Classification

SETUP = """
CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT);
INSERT INTO log (note) VALUES ('first');
ANALYZE;
"""


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "approved.db"
    with closing(sqlite3.connect(path)) as setup:
        setup.executescript(SETUP)
    return path


def classified(path: Path, sql: str) -> Classification:
    inspector = open_inspector(path)
    try:
        with inspector.session(5) as connection:
            return inspect_statement(connection, sql, schema_facts(connection))
    finally:
        inspector.close()


def test_a_trigger_the_approval_did_not_see_cannot_rewrite_sqlite_s_own_tables(database: Path) -> None:
    approved = classified(database, "INSERT INTO log (note) VALUES ('x')")
    writer = sqlite3.connect(database, isolation_level=None)
    # A temporary trigger lives on one connection only: the one that classified the statement never saw it.
    writer.execute(
        "CREATE TEMP TRIGGER rewrite_stats AFTER INSERT ON main.log BEGIN UPDATE sqlite_stat1 SET stat = '1 1'; END"
    )
    stats_before = writer.execute("SELECT * FROM sqlite_stat1").fetchall()
    writer.set_authorizer(approved_only(approved, frozenset()))
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        writer.execute(approved.statement)
    writer.set_authorizer(None)
    assert writer.execute("SELECT * FROM sqlite_stat1").fetchall() == stats_before
    assert writer.execute("SELECT count(*) FROM log").fetchone() == (1,)
    writer.close()


def test_an_approved_schema_change_still_records_itself_in_the_catalog(database: Path) -> None:
    approved = classified(database, "CREATE TABLE extra (id INTEGER PRIMARY KEY)")
    writer = sqlite3.connect(database, isolation_level=None)
    writer.set_authorizer(approved_only(approved, frozenset()))
    writer.execute(approved.statement)
    writer.set_authorizer(None)
    assert writer.execute("SELECT name FROM sqlite_schema WHERE name = 'extra'").fetchone() == ("extra",)
    writer.close()
