"""Red team, multi-target policies of 2026-11-29: a target's policy judged a PostgreSQL statement by what it says
alone, not by the code it sets off. On a target that runs data changes unasked, a one-row INSERT ran a trigger's
DROP TABLE and GRANT ALL ... TO PUBLIC, and a column default's DROP TABLE, without a question; on one that refuses
schema changes whatever anyone answers, an approved INSERT ran a trigger's DROP. That code (triggers, rules, event
triggers, user-defined functions of stored code) is not judged, so it now counts as an unrecognised change too
(`Classification.sets_off_unjudged_code`): a target that asks or refuses those asks or refuses such a statement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from safedb.settings import Policy
from safedb.sql.classification import ChangeCategory
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase

pytestmark = pytest.mark.anyio

_SETUP = (
    "DROP TABLE IF EXISTS precious, log, defaulted, plain CASCADE",
    "DROP FUNCTION IF EXISTS drop_precious() CASCADE",
    "DROP FUNCTION IF EXISTS drop_precious_value() CASCADE",
    "CREATE TABLE precious (id integer)",
    "CREATE TABLE log (msg text)",
    "CREATE TABLE plain (id integer)",
    "CREATE FUNCTION drop_precious() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN DROP TABLE IF EXISTS precious; RETURN NEW; END $$",
    "CREATE TRIGGER log_insert AFTER INSERT ON log FOR EACH ROW EXECUTE FUNCTION drop_precious()",
    "CREATE FUNCTION drop_precious_value() RETURNS integer LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN DROP TABLE IF EXISTS precious; RETURN 1; END $$",
    "CREATE TABLE defaulted (id integer DEFAULT drop_precious_value())",
)
DATA_UNASKED = Policy(ask=frozenset({ChangeCategory.SCHEMA, ChangeCategory.DATABASE, ChangeCategory.UNKNOWN}))
REFUSING = Policy(
    refuse=frozenset({ChangeCategory.SCHEMA, ChangeCategory.DATABASE, ChangeCategory.EXTENSION, ChangeCategory.UNKNOWN})
)
SETTING_OFF = ["INSERT INTO log (msg) VALUES ('boom')", "INSERT INTO defaulted DEFAULT VALUES"]


@pytest.fixture
def fresh(empty_pg: PgDatabase) -> PgDatabase:
    empty_pg.run_as_owner(*_SETUP)
    return empty_pg


def precious_exists(pg: PgDatabase) -> bool:
    return pg.rows("SELECT to_regclass('public.precious') IS NOT NULL") == [(True,)]


@pytest.mark.parametrize("sql", SETTING_OFF)
async def test_code_a_data_change_sets_off_is_asked_where_data_changes_run_unasked(
    fresh: PgDatabase, tmp_path: Path, sql: str
) -> None:
    responder = Responder(action="decline")
    result, decisions = await fresh.call_execute_query(sql, tmp_path / "audit.db", responder, policy=DATA_UNASKED)

    assert len(responder.asked) == 1
    assert "; unrecognised change by the code it sets off" in responder.asked[0].message
    assert decisions == ["requested", "declined"]
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    assert precious_exists(fresh)


@pytest.mark.parametrize("sql", SETTING_OFF)
async def test_code_a_data_change_sets_off_is_refused_where_unrecognised_changes_are(
    fresh: PgDatabase, tmp_path: Path, sql: str
) -> None:
    responder = Responder()
    result, decisions = await fresh.call_execute_query(sql, tmp_path / "audit.db", responder, policy=REFUSING)

    assert responder.asked == []
    assert decisions == ["blocked"]
    assert "refuses unrecognised change outright" in result.content[0].text  # type: ignore[union-attr]
    assert precious_exists(fresh)


async def test_a_data_change_that_sets_off_nothing_still_runs_unasked(fresh: PgDatabase, tmp_path: Path) -> None:
    responder = Responder()
    sql = "INSERT INTO plain VALUES (1)"
    result, decisions = await fresh.call_execute_query(sql, tmp_path / "audit.db", responder, policy=DATA_UNASKED)

    assert responder.asked == []
    assert decisions == ["accepted", "executed"]
    assert not result.is_error
    assert fresh.rows("SELECT count(*) FROM plain") == [(1,)]
