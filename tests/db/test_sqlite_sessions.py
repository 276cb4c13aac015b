"""A connection's session: past its time limit SQLite stops the work, but never a COMMIT or ROLLBACK halfway,
a session never ends with a transaction open (which would keep the write lock from everyone else), and it ends
with the connection's own authorizer."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from safedb.db.sqlite.connections import Authorizer, AuthorizerNotingConnection, GuardedConnection, commit
from safedb.errors import QueryTimeout


def guarded_writer(path: Path, authorizer: Authorizer | None, progress_steps: int) -> GuardedConnection:
    """A writer on a new file at `path` holding an empty table `t`."""
    with closing(sqlite3.connect(path)) as setup:
        setup.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY);")
    connection = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=0, factory=AuthorizerNotingConnection
    )
    return GuardedConnection(connection, authorizer, progress_steps=progress_steps)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[GuardedConnection]:
    """A writer that checks its time limit at every SQLite step, so that even COMMIT would be checked."""
    guarded = guarded_writer(tmp_path / "sessions.db", None, progress_steps=1)
    yield guarded
    guarded.close()


def ids(guarded: GuardedConnection) -> list[int]:
    with guarded.session(10.0) as connection:
        return [row[0] for row in connection.execute("SELECT id FROM t ORDER BY id")]


def test_a_commit_reached_after_the_time_limit_still_commits(guarded: GuardedConnection) -> None:
    with guarded.session(0.001) as connection:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO t VALUES (1)")
        time.sleep(0.01)
        commit(connection)
    assert ids(guarded) == [1]


def test_work_stopped_inside_a_transaction_is_rolled_back_and_frees_the_write_lock(
    guarded: GuardedConnection, tmp_path: Path
) -> None:
    def insert_then_read_too_late() -> None:
        with guarded.session(0.001) as connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO t VALUES (2)")
            time.sleep(0.01)
            connection.execute("SELECT count(*) FROM t").fetchone()  # stopped; the transaction stays open

    with pytest.raises(QueryTimeout):
        insert_then_read_too_late()
    assert not guarded.connection.in_transaction
    other = sqlite3.connect(tmp_path / "sessions.db", timeout=0)
    try:
        other.execute("INSERT INTO t VALUES (3)")  # would fail at once if the write lock were still held
        other.commit()
    finally:
        other.close()
    assert ids(guarded) == [3]


def test_a_session_sets_the_authorizer_back_only_when_its_work_set_another(tmp_path: Path) -> None:
    """Setting an authorizer makes SQLite prepare every statement again, under it: sessions that leave it alone
    keep their connection's prepared statements."""
    asked: list[int] = []

    def counting(code: int, *_: str | None) -> int:
        asked.append(code)
        return sqlite3.SQLITE_OK

    guarded = guarded_writer(tmp_path / "authorizer.db", counting, progress_steps=1000)
    try:
        assert ids(guarded) == []
        prepared_once = len(asked)
        assert prepared_once > 0
        assert ids(guarded) == []
        assert len(asked) == prepared_once  # the prepared statement was kept
        with guarded.session(10.0) as work:
            work.set_authorizer(None)
        assert ids(guarded) == []
        assert len(asked) > prepared_once  # `counting` is back, and the statement was prepared again under it
    finally:
        guarded.close()
