"""Red team, a sweep of the built-in and extension functions SafeDB lets run without asking (2026-11-29):

- `SELECT domain_in('5', 'ending_int'::regtype, -1)` ran at once: PostgreSQL labels the input functions that take a
  type's oid stable, but `domain_in` runs the named domain's CHECK, which may call any function (here, one that ends
  other sessions), and `array_in`, `record_in`, `range_in` and `multirange_in` do the same for a domain element,
  column or subtype. The type is only an argument (an oid), so no cast to it is seen. Neither the read-only
  transaction nor the reader role stops them. They now ask;
- `SELECT pg_get_partition_constraintdef(oid)` of a partition, and `satisfies_hash_partition(oid, ...)` of a
  partitioned table, ran at once: both labelled stable, they load the table's partition key, which folds its
  expressions, so a function there labelled immutable runs (here, one that ends other sessions); the table is only
  an oid, so its key is never examined. They now ask;
- `SELECT xpath('count(//*[count(//*[count(//*) > 0]) > 0])', <a document of 3,000 elements>)` ran at once, and
  its session was still busy minutes later: libxml2 evaluates XPath without letting PostgreSQL act on a cancel, so
  the statement timeout (and SafeDB's own bound, after which it gave up on the call) stopped nothing, nor did
  `pg_terminate_backend()`; only killing the process (which restarts the whole server) did. Each such call held a
  connection slot and a CPU for as long as its expression took (a fourth nesting: days). XPath evaluation
  (`xpath`, `xpath_exists`, `XMLEXISTS`, `XMLTABLE`, xml2's `xpath_*`) now asks;
- pg_trgm's word similarity likewise: `word_similarity(repeat('abc ', 1000), repeat('abc ', 40000))` ran for 28 s
  under a 1 s statement timeout (80,000: 97 s; `strict_word_similarity` of two strings of some megabytes was still
  running, past every cancel, after ten minutes). Its functions and operators (`<%`, `%>`, `<<%`, `<<->`...) now
  ask; `similarity()` and `%` stay reads.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.conftest import (
    ENDER,
    FOLDED_ENDER_TABLES,
    PgDatabase,
    Victims,
    assert_asks_without_ending,
    database_with,
)
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio


# A document of 800 elements and an expression of cubic cost: some seconds of work that no cancel interrupts.
SLOW_XPATH = "'count(//*[count(//*[count(//*) > 0]) > 0])'"
SLOW_DOCUMENT = "('<r>' || repeat('<a/>', 800) || '</r>')"


@pytest.fixture(scope="module")
def typed(pg: PgDatabase) -> PgDatabase:
    pg.run_as_owner(
        ENDER,
        "CREATE DOMAIN ending_int AS integer CHECK (ender())",
        "CREATE TYPE ending_pair AS (x ending_int)",
        "CREATE TYPE ending_range AS RANGE (subtype = ending_int)",
        *FOLDED_ENDER_TABLES,
    )
    return pg


@pytest.fixture(scope="module")
def xml2(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    """A database with xml2 and pg_trgm installed (by a superuser, as an administrator would)."""
    extensions = ("CREATE EXTENSION xml2", "CREATE EXTENSION pg_trgm")
    with database_with(postgres_cluster, (), lambda server, name: extensions) as database:
        yield database


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT domain_in('5', 'ending_int'::regtype, -1) IS NULL",
        "SELECT array_in('{5}', 'ending_int'::regtype, -1)",
        "SELECT record_in('(5)', 'ending_pair'::regtype, -1)",
        "SELECT range_in('[1,5)', 'ending_range'::regtype, -1)",
        "SELECT multirange_in('{[1,5)}', 'ending_multirange'::regtype, -1)",
        # The oid from a column, not a literal: only the function's name can tell.
        "SELECT domain_in('5', oid, -1) IS NULL FROM pg_type WHERE typname = 'ending_int'",
    ],
)
async def test_an_input_function_given_a_type_asks(typed: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(typed, victims, sql)


async def test_plain_input_and_casts_of_built_in_types_still_read(typed: PgDatabase) -> None:
    classifications = await typed.classifications("SELECT '{1,2}'::integer[], '(1,2)'::point, int4range(1, 5)")

    assert [c.read_only for c in classifications] == [True]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT pg_get_partition_constraintdef('keyed_parted_low'::regclass)",
        "SELECT pg_get_partition_constraintdef(oid) FROM pg_class WHERE relname = 'keyed_parted_low'",
        "SELECT satisfies_hash_partition('keyed_parted'::regclass, 2, 0, 1)",
    ],
)
async def test_a_function_loading_a_partition_key_asks(typed: PgDatabase, victims: Victims, sql: str) -> None:
    await assert_asks_without_ending(typed, victims, sql)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT xpath({SLOW_XPATH}, {SLOW_DOCUMENT}::xml)",
        f"SELECT xpath_exists({SLOW_XPATH}, {SLOW_DOCUMENT}::xml)",
        f"SELECT XMLEXISTS({SLOW_XPATH} PASSING ({SLOW_DOCUMENT}::xml))",
        f"SELECT * FROM XMLTABLE('/r' PASSING ({SLOW_DOCUMENT}::xml) COLUMNS n float PATH {SLOW_XPATH})",
        "SELECT n FROM (VALUES (1)) AS v(n) WHERE EXISTS (SELECT FROM XMLTABLE('/r' PASSING '<r/>' COLUMNS m text))",
    ],
)
async def test_xpath_evaluation_asks(typed: PgDatabase, sql: str) -> None:
    (classification,) = await typed.classifications(sql)

    assert not classification.read_only
    assert "statement timeout cannot stop" in " ".join(str(change) for change in classification.changes)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT xpath_number({SLOW_DOCUMENT}, {SLOW_XPATH})",
        f"SELECT xpath_string({SLOW_DOCUMENT}, {SLOW_XPATH})",
        f"SELECT xpath_bool({SLOW_DOCUMENT}, {SLOW_XPATH})",
        f"SELECT xpath_nodeset({SLOW_DOCUMENT}, {SLOW_XPATH})",
        f"SELECT xpath_list({SLOW_DOCUMENT}, {SLOW_XPATH})",
    ],
)
async def test_xml2_xpath_evaluation_asks(xml2: PgDatabase, sql: str) -> None:
    (classification,) = await xml2.classifications(sql)

    assert not classification.read_only


async def test_building_and_parsing_xml_still_reads(typed: PgDatabase) -> None:
    classifications = await typed.classifications(
        "SELECT xmlparse(document '<a/>'), xmlelement(name a, 1), xml_is_well_formed('<a/>'), xmlserialize(content "
        "'<a/>'::xml AS text)"
    )

    assert [c.read_only for c in classifications] == [True]


SHORT = "repeat('abc ', 1000)"
LONG = "repeat('abc ', 40000)"


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT word_similarity({SHORT}, {LONG})",
        f"SELECT strict_word_similarity({SHORT}, {LONG})",
        f"SELECT {SHORT} <% {LONG}",
        f"SELECT {LONG} %> {SHORT}",
        f"SELECT {SHORT} <<% {LONG}",
        f"SELECT {SHORT} <<-> {LONG}",
        f"SELECT {LONG} <->> {SHORT}",
        f"SELECT {SHORT} <<<-> {LONG}",
    ],
)
async def test_word_similarity_asks(xml2: PgDatabase, sql: str) -> None:
    (classification,) = await xml2.classifications(sql)

    assert not classification.read_only


async def test_trigram_similarity_still_reads(xml2: PgDatabase) -> None:
    classifications = await xml2.classifications("SELECT similarity('abc', 'abd'), 'abc' % 'abd', 'abc' <-> 'abd'")

    assert [c.read_only for c in classifications] == [True]
