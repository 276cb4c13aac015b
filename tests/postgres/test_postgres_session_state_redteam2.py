"""Red team (2026-11-29): a setting every new pooled session gets from the database, `lc_messages`.

What a DROP ... CASCADE takes with it is read from PostgreSQL's notices ("drop cascades to view v"), which the
server words in the language of `lc_messages`: a server set up in German (or an `ALTER DATABASE ... SET
lc_messages`, approved or not) reports "Löschvorgang löscht ebenfalls Sicht v". SafeDB matched the English words
only, so the question of `DROP TABLE a CASCADE` showed nothing else dropped, and its approval, held to that empty
list, dropped the views and the foreign key all the same, and any view made meanwhile too.

The server here has a German locale of its own (made with `localedef`, found through LOCPATH); without the tools to
make one, or PostgreSQL's German messages, the tests are skipped.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import ElicitRequestFormParams

from tests.conftest_postgres import fresh_database
from tests.postgres.conftest import ChangesWhileDeciding, PgDatabase
from tests.postgres_server import PostgresUnavailable, postgres_server

pytestmark = pytest.mark.anyio

GERMAN = "de_DE.UTF-8"
SETUP = (
    "CREATE TABLE a (id integer PRIMARY KEY)",
    "CREATE VIEW a_view AS SELECT * FROM a",
    "CREATE VIEW a_view_view AS SELECT * FROM a_view",
    "CREATE TABLE b (id integer REFERENCES a)",
)


def _german_locale(directory: Path) -> None:
    if shutil.which("localedef") is None or not glob.glob("/usr/share/locale/de/LC_MESSAGES/postgres-*.mo"):
        pytest.skip("needs localedef and PostgreSQL's German messages")
    made = subprocess.run(
        ["localedef", "-i", "de_DE", "-f", "UTF-8", str(directory / GERMAN)],
        check=False,
        capture_output=True,
        timeout=120,
    )
    if not (directory / GERMAN / "LC_MESSAGES").exists():
        pytest.skip(f"localedef could not make {GERMAN}: {made.stderr.decode(errors='replace')[-300:]}")


@pytest.fixture(scope="module")
def german() -> Iterator[PgDatabase]:
    """A server that can speak German, and a database whose sessions do (`ALTER DATABASE ... SET lc_messages`)."""
    locales = Path(tempfile.mkdtemp(prefix="safedb-locales-"))
    locales.chmod(0o755)  # read by the server's own OS user
    patch = pytest.MonkeyPatch()
    try:
        _german_locale(locales)
        patch.setenv("LOCPATH", str(locales))
        try:
            with postgres_server() as server:
                patch.undo()
                name = fresh_database(server, SETUP)
                with server.connect(name) as admin:
                    admin.execute(f"ALTER DATABASE \"{name}\" SET lc_messages = '{GERMAN}'".encode())
                yield PgDatabase(server, name)
        except PostgresUnavailable as exc:
            pytest.skip(str(exc))
    finally:
        patch.undo()
        shutil.rmtree(locales, ignore_errors=True)


@pytest.fixture
def pg(german: PgDatabase) -> PgDatabase:
    german.run_as_owner(*(f"DROP TABLE IF EXISTS {t} CASCADE" for t in ("a", "b")), *SETUP)
    return german


async def test_the_server_speaks_german(pg: PgDatabase) -> None:
    with pg.server.connect(pg.name) as connection, pytest.raises(Exception, match="Division durch Null"):
        connection.execute(b"SELECT 1/0")


async def test_a_drop_shows_what_it_takes_with_it_in_the_servers_language(pg: PgDatabase) -> None:
    _, impact = await pg.asked("DROP TABLE a CASCADE")

    shown = "\n".join(impact.lines)
    for dependent in ("a_view", "a_view_view", "b_id_fkey"):
        assert dependent in shown, shown
    assert impact.drops is not None
    assert len(impact.drops) == 3


async def test_an_approved_drop_takes_nothing_its_question_did_not_show(pg: PgDatabase, tmp_path: Path) -> None:
    responder = ChangesWhileDeciding(pg=pg, meanwhile=("CREATE VIEW made_meanwhile AS SELECT * FROM a",))
    result, decisions = await pg.call_execute_query("DROP TABLE a CASCADE", tmp_path / "audit.db", responder)

    assert pg.rows("SELECT count(*) FROM pg_class WHERE relname IN ('a', 'a_view', 'made_meanwhile')") == [(3,)]
    assert result.is_error
    (question, *_) = responder.asked
    assert isinstance(question, ElicitRequestFormParams)
    assert "a_view_view" in question.message
    assert "executed" not in decisions
