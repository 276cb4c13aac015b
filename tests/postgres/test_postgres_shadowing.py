"""A function or operator that could take the place of PostgreSQL's own in SafeDB's catalog queries
(`shadowing`): SafeDB refuses to check statements while there is one, so none can hide a trigger from a question
or let a dry run fire it. Found by the red team on 2026-11-28: a `public.unnest(text[])`, an exact match for the
text arrays SafeDB unnests, made every question leave out a table's trigger, and the dry run made before anyone
answered fired it (a declined DELETE still moved a sequence)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
from collections.abc import Iterator
from pathlib import Path

import pglast
import pytest
from pglast import ast
from pglast.visitors import Visitor

import safedb.db.postgres
from safedb.db.postgres.shadowing import CATALOG_FUNCTIONS, CATALOG_OPERATORS
from safedb.errors import QueryFailed
from tests.helpers import Responder
from tests.postgres.conftest import PgDatabase, database_with
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

SETUP = (
    "CREATE SEQUENCE fired",
    "CREATE TABLE ledger (id integer PRIMARY KEY, v integer)",
    "INSERT INTO ledger SELECT g, g FROM generate_series(1, 5) AS g",
    "CREATE FUNCTION count_fired() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('fired'); RETURN NULL; END $$",
    "CREATE TRIGGER ledger_counted AFTER DELETE ON ledger FOR EACH ROW EXECUTE FUNCTION count_fired()",
    # Named like built-ins SafeDB calls, but for a type of the database's own: they cannot take their place.
    "CREATE TYPE mood AS ENUM ('calm', 'loud')",
    "CREATE FUNCTION unnest(mood) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 1'",
    "CREATE FUNCTION mood_is(mood, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1::text = $2'",
    "CREATE OPERATOR = (LEFTARG = mood, RIGHTARG = text, FUNCTION = mood_is)",
)
# Hides every quoted name in a text array, as SafeDB passes the relations a statement names.
HIDING_UNNEST = (
    "CREATE FUNCTION public.unnest(a text[]) RETURNS SETOF text LANGUAGE sql AS "
    "$$ SELECT x FROM pg_catalog.unnest(a) AS x WHERE x NOT LIKE '\"%' $$"
)
SHADOWS = {
    "function unnest(text[])": (HIDING_UNNEST, "DROP FUNCTION public.unnest(text[])"),
    "operator =(regclass,oid)": (
        "CREATE FUNCTION never_equal(regclass, oid) RETURNS boolean LANGUAGE sql AS 'SELECT false'; "
        "CREATE OPERATOR public.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = never_equal)",
        "DROP OPERATOR public.= (regclass, oid); DROP FUNCTION never_equal(regclass, oid)",
    ),
    # The `=` of the database's own type, once integers convert to it unasked.
    "operator =(mood,text)": (
        "CREATE FUNCTION int_mood(integer) RETURNS mood LANGUAGE sql AS $$ SELECT 'calm'::mood $$; "
        "CREATE CAST (integer AS mood) WITH FUNCTION int_mood(integer) AS IMPLICIT",
        "DROP CAST (integer AS mood); DROP FUNCTION int_mood(integer)",
    ),
}


@pytest.fixture(scope="module")
def pg(postgres_cluster: PostgresServer) -> Iterator[PgDatabase]:
    with database_with(postgres_cluster, SETUP) as database:
        yield database


@pytest.fixture
def shadowed(pg: PgDatabase, request: pytest.FixtureRequest) -> Iterator[str]:
    """The database with one shadow (the parameter names it), dropped afterwards."""
    name: str = request.param
    create, drop = SHADOWS[name]
    pg.run_as_owner(create)
    yield name
    pg.run_as_owner(drop)


def _fired(pg: PgDatabase) -> int:
    ((last_value, is_called),) = pg.rows("SELECT last_value, is_called FROM fired")
    return int(last_value) if is_called else 0


async def test_without_a_shadow_the_question_names_the_trigger(pg: PgDatabase) -> None:
    (shown,) = await pg.classifications("DELETE FROM ledger WHERE id = 1")
    (preview,) = await pg.previews("DELETE FROM ledger WHERE id = 1")

    assert any("ledger_counted" in fired for fired in shown.runs), shown.runs
    assert "no dry run" in " ".join(preview.lines)
    assert (await pg.classifications("SELECT unnest('calm'::mood), 'calm'::mood = 'calm'"))[0].read_only


@pytest.mark.parametrize("shadowed", list(SHADOWS), indirect=True)
async def test_a_shadow_stops_every_check_naming_itself(pg: PgDatabase, shadowed: str) -> None:
    database = pg.open()
    try:
        for check in (
            lambda: database.classify("SELECT * FROM ledger"),
            lambda: database.classify("DELETE FROM ledger WHERE id = 1"),
            database.list_tables,
            lambda: database.describe_table("ledger"),
        ):
            with pytest.raises(QueryFailed, match=re.escape(shadowed)):
                await check()
    finally:
        await database.aclose()


@pytest.mark.parametrize("shadowed", ["function unnest(text[])"], indirect=True)
async def test_an_approval_given_before_the_shadow_came_runs_nothing(pg: PgDatabase, shadowed: str) -> None:
    pg.run_as_owner(SHADOWS[shadowed][1])
    (shown,) = await pg.classifications("DELETE FROM ledger WHERE id = 1")
    pg.run_as_owner(SHADOWS[shadowed][0])  # while a person decides
    fired = _fired(pg)
    database = pg.open()
    try:
        with pytest.raises(QueryFailed, match=re.escape(shadowed)):
            await database.preview(shown)
        with pytest.raises(QueryFailed, match=re.escape(shadowed)):
            await database.write(shown)
    finally:
        await database.aclose()

    assert pg.rows("SELECT count(*) FROM ledger WHERE id = 1") == [(1,)]
    assert _fired(pg) == fired


@pytest.mark.parametrize("shadowed", ["function unnest(text[])"], indirect=True)
async def test_through_the_server_nothing_is_asked_or_fired(pg: PgDatabase, shadowed: str, tmp_path: Path) -> None:
    fired = _fired(pg)
    responder = Responder(action="decline")
    query = "DELETE FROM ledger WHERE id = 1"
    result, decisions = await pg.call_execute_query(query, tmp_path / "audit.db", responder)

    assert result.is_error
    assert "instead of PostgreSQL's own" in result.content[0].text, result.content  # type: ignore[union-attr]
    assert responder.asked == []
    assert "executed" not in decisions, decisions
    assert _fired(pg) == fired
    assert pg.rows("SELECT count(*) FROM ledger WHERE id = 1") == [(1,)]


# What SafeDB's own SQL calls and applies by name, read from every string of its PostgreSQL modules that parses.


def _strings(code: types.CodeType) -> Iterator[str]:
    for constant in code.co_consts:
        if isinstance(constant, str):
            yield constant
        elif isinstance(constant, types.CodeType):
            yield from _strings(constant)


def _module_strings() -> Iterator[str]:
    for info in pkgutil.iter_modules(safedb.db.postgres.__path__):
        module = importlib.import_module(f"safedb.db.postgres.{info.name}")
        yield from _strings(compile(Path(module.__file__ or "").read_text(), module.__name__, "exec"))
        yield from (value for value in vars(module).values() if isinstance(value, str))  # built by f-strings


def _as_sql(text: str) -> str:
    """psycopg's placeholders (`%s`, `%(name)s`) and `sql.SQL`'s (`{}`, `{name}`) as values and names."""
    text = re.sub(r"%\(\w+\)s|%s", "NULL", text).replace("%%", "%")
    return re.sub(r"\{\w*\}", "x", text)


class _Names(Visitor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.functions: set[str] = set()
        self.operators: set[str] = set()

    def _operator(self, name: tuple[ast.String, ...] | None) -> None:
        if name and len(name) == 1:  # `OPERATOR(pg_catalog.=)` names its schema
            self.operators.add(name[0].sval)

    def visit_FuncCall(self, parent: object, node: ast.FuncCall) -> None:
        if len(node.funcname) == 1:
            self.functions.add(node.funcname[0].sval)

    def visit_A_Expr(self, parent: object, node: ast.A_Expr) -> None:
        if node.kind.name.startswith("AEXPR_BETWEEN") or node.kind.name.startswith("AEXPR_NOT_BETWEEN"):
            self.operators.update(("<=", ">="))
        else:
            self._operator(node.name)

    def visit_SubLink(self, parent: object, node: ast.SubLink) -> None:
        self._operator(node.operName)

    def visit_SortBy(self, parent: object, node: ast.SortBy) -> None:
        self._operator(node.useOp)


def _catalog_sql_names() -> tuple[_Names, int]:
    names = _Names()
    parsed = 0
    for text in set(_module_strings()):
        if not re.search(r"\bSELECT\b", text):
            continue
        try:
            tree = pglast.parse_sql(_as_sql(text))
        except pglast.parser.ParseError:
            continue  # a piece of a query, which the whole query holds too
        parsed += 1
        names(tree)
    return names, parsed


def test_the_check_covers_every_function_and_operator_safedb_names() -> None:
    names, parsed = _catalog_sql_names()

    assert parsed >= 30, parsed  # the modules' queries were read
    assert {"unnest", "to_regclass", "regexp_matches", "pg_get_triggerdef"} <= names.functions
    assert names.functions - CATALOG_FUNCTIONS == set()
    assert {"=", "||", "<>", "~~"} <= names.operators
    assert names.operators - CATALOG_OPERATORS == set()
