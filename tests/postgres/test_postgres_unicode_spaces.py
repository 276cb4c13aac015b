"""Red team: SafeDB judged one statement and ran another. It sent PostgreSQL the statement's text stripped with
Python's `str.strip()`, which also takes a no-break space, U+3000 and other Unicode spaces off its ends. PostgreSQL's
scanner reads those as part of a name, so every check looked at a table or view named `ledger` + U+00A0 (which
usually does not exist), while the read, the dry run and the approved run named `ledger`:

- `SELECT * FROM <a view that ends sessions>` + U+00A0 ran at once and ended another session;
- `DELETE FROM ledger` + U+00A0: its question named no trigger, and its dry run fired the trigger before anyone
  answered;
- with a table named `ledger2` + U+00A0 present, an approval held to it ran `DELETE FROM ledger2`, firing a trigger
  added while the person decided.

The text run is now the text parsed, less only PostgreSQL's own white space, and the question shows such a space
by its name.
"""

from __future__ import annotations

import pytest

from safedb.approval.display import visible_statement
from safedb.db.backend import Bounds
from safedb.db.postgres.function_bodies import _schema_names
from safedb.errors import SafeDBError
from safedb.sql.postgres_classifier import parse_one
from tests.postgres.conftest import ENDER, PgDatabase, Victims, ended

pytestmark = pytest.mark.anyio

# Spaces to Python (`str.isspace`), name characters to PostgreSQL.
NAME_SPACES = ["\u00a0", "\u0085", "\u2007", "\u202f", "\u3000", "\u2028"]


@pytest.fixture(scope="module")
def spaced(pg: PgDatabase) -> PgDatabase:
    pg.run_as_owner(
        ENDER,
        "CREATE VIEW ending_view AS SELECT ender() AS ended",
        "CREATE TABLE ledger (id integer)",
        "INSERT INTO ledger SELECT generate_series(1, 3)",
        "CREATE SEQUENCE ledger_deletions",
        "CREATE FUNCTION ledger_on_delete() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN PERFORM nextval('ledger_deletions'); RETURN OLD; END$$",
        "CREATE TRIGGER ledger_del BEFORE DELETE ON ledger FOR EACH ROW EXECUTE FUNCTION ledger_on_delete()",
        'CREATE TABLE "ledger\u00a0" (id integer)',
        'INSERT INTO "ledger\u00a0" VALUES (1)',
    )
    return pg


@pytest.mark.parametrize("space", NAME_SPACES)
def test_the_text_run_is_the_text_parsed(space: str) -> None:
    raw, text = parse_one(f"DELETE FROM ledger{space}")

    assert text == f"DELETE FROM ledger{space}"
    assert raw.stmt.relation.relname == f"ledger{space}"


def test_postgresql_white_space_around_a_statement_is_left_out() -> None:
    _, text = parse_one(" \t\r\n\f\vDELETE FROM ledger \t\r\n\f\v")

    assert text == "DELETE FROM ledger"


@pytest.mark.parametrize("space", NAME_SPACES)
def test_the_question_names_such_a_space(space: str) -> None:
    assert visible_statement(f"DELETE FROM ledger{space}") == f"DELETE FROM ledger⟨U+{ord(space):04X}⟩"


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("app, public", ["app", "public"]),
        ("app\u00a0, public", ["app\u00a0", "public"]),  # a schema a function's SET search_path may name
        ('"app\vx", public', ["app\vx", "public"]),
        ("app,\vpublic", None),  # white space to PostgreSQL 16 and later only: not read either way
        ("App, ÉTÉ", ["app", "ÉtÉ"]),  # folded in ASCII only, as in a UTF-8 database
    ],
)
def test_a_functions_search_path_is_read_as_postgresql_reads_it(path: str, names: list[str] | None) -> None:
    assert _schema_names(path) == names


async def test_a_read_of_a_view_named_with_a_trailing_no_break_space_ends_no_session(
    spaced: PgDatabase, victims: Victims
) -> None:
    database = spaced.open()
    try:
        classification = await database.classify("SELECT * FROM ending_view\u00a0")
        with pytest.raises(SafeDBError, match="does not exist"):
            await database.read(classification)
    finally:
        await database.aclose()

    assert ended(victims) == []


async def test_the_preview_of_a_change_to_another_table_fires_no_trigger_of_this_one(spaced: PgDatabase) -> None:
    _, impact = await spaced.asked("DELETE FROM ledger\u00a0")

    assert impact.rows_affected == 1  # the one row of "ledger" + U+00A0
    assert spaced.rows("SELECT is_called FROM ledger_deletions") == [(False,)]


async def test_an_approval_of_a_change_to_another_table_changes_only_that_table(spaced: PgDatabase) -> None:
    shown, impact = await spaced.asked("DELETE FROM ledger\u00a0")

    await spaced.run_approved(shown, Bounds(rows=impact.rows_affected))

    assert spaced.rows('SELECT count(*) FROM "ledger\u00a0"') == [(0,)]
    assert spaced.rows("SELECT count(*) FROM ledger") == [(3,)]
    assert spaced.rows("SELECT is_called FROM ledger_deletions") == [(False,)]
