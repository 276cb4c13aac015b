"""Red team, PostgreSQL differential fuzzing of 2026-11-29:

- `SELECT fmgr_sql_validator(oid)` ran at once: PostgreSQL labels the languages' validators stable, but validating
  an SQL function parses its body, and a literal cast to a domain there runs the domain's CHECK, which may call
  any function (here, one that ends other sessions); `fmgr_c_validator` loads a function's library into the pooled
  session. Neither the read-only transaction nor the reader role stops them. They now ask;
- a function called twice, once with a string literal first and once without (`lower('A'), lower(s)`), made the
  classification fail with a TypeError (its calls were sorted with None among strings): a plain read was refused.
"""

from __future__ import annotations

import pytest

from tests.postgres.conftest import ENDER, PgDatabase, Victims, assert_asks_without_ending

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def validated(pg: PgDatabase) -> PgDatabase:
    pg.run_as_owner(
        ENDER,
        "CREATE FUNCTION folded_ender_check() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS "
        "$$ BEGIN RETURN ender(); END $$",
        "CREATE DOMAIN ending_int AS integer CHECK (folded_ender_check())",
        "SET check_function_bodies = off",
        "CREATE FUNCTION validated_target() RETURNS integer LANGUAGE sql AS "
        "$$ SELECT array_length('{5}'::ending_int[], 1) $$",
        "CREATE TABLE lettered (s text)",
        "INSERT INTO lettered VALUES ('B')",
    )
    return pg


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT fmgr_sql_validator('validated_target'::regproc)",
        "SELECT fmgr_internal_validator('validated_target'::regproc)",
        "SELECT fmgr_c_validator('validated_target'::regproc)",
    ],
)
async def test_a_languages_validator_asks(validated: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(validated, victims, sql)


async def test_a_function_called_with_and_without_a_literal_is_classified(validated: PgDatabase) -> None:
    (classification,) = await validated.classifications("SELECT lower('A'), lower(s) FROM lettered")

    assert classification.read_only
