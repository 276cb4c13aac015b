"""Third red-team pass over the SQLite backend: what it found, as tests.

Built-in functions whose one call does work that grows with the product of its arguments' sizes (`instr`,
`trim`, `like`, `glob`): a single step of SQLite's program, which neither the progress handler nor an
interrupt stops, on values of a few tens of kilobytes that a recursive WITH query builds in a few steps.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.errors import InvalidStatement, QueryTimeout
from safedb.sql.classification import MAX_STATEMENT_CHARS
from tests.helpers import watching_the_loop

pytestmark = pytest.mark.anyio

# `s`: 2**n `a`s, `y`: as many `b`s, built by doubling.
_DOUBLED = (
    "WITH RECURSIVE d(n, s, y) AS (SELECT 0, 'a', 'b' UNION ALL SELECT n + 1, s || s, y || y FROM d WHERE n < {n}) "
)

# Each call takes one to three seconds (one level more takes two to four times as long): a needle that matches
# all but its last character at every place, a character set whose match is its last character, a pattern
# that matches all but its end at every place.
SUPERLINEAR_CALLS = {
    "instr": (19, f"instr(s, substr(s, 1, {2**18}) || 'b')"),
    "trim": (15, "length(trim(s, y || 'a'))"),
    "ltrim": (15, "length(ltrim(s, y || 'a'))"),
    "like": (16, f"s LIKE '%' || substr(s, 1, {2**15}) || 'b'"),
    "glob": (16, f"s GLOB '*' || substr(s, 1, {2**15}) || 'b'"),
}


def read_of(levels: int, call: str) -> str:
    return _DOUBLED.format(n=levels) + f"SELECT {call} FROM d WHERE n = {levels}"


def delete_of(levels: int, call: str) -> str:
    return _DOUBLED.format(n=levels) + f"DELETE FROM items WHERE id = (SELECT {call} FROM d WHERE n = {levels}) + 100"


CALLS = pytest.mark.parametrize(("levels", "call"), SUPERLINEAR_CALLS.values(), ids=SUPERLINEAR_CALLS.keys())


@CALLS
async def test_a_superlinear_builtin_call_does_not_hold_up_the_event_loop(
    database_file: Path, levels: int, call: str
) -> None:
    """A read that calls one: it ran on the event loop, stopping every other client for as long as the call
    takes (minutes, a few levels more), whatever its time limit."""
    database = SqliteDatabase(database_file, QueryLimits())
    try:
        classification = await database.classify(read_of(levels, call))
        assert classification.read_only
        result, longest = await watching_the_loop(lambda: database.read(classification))
    finally:
        await database.aclose()
    assert result.rows == ((0,),)
    assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"


@CALLS
async def test_a_superlinear_builtin_call_does_not_hold_up_the_event_loop_in_a_dry_run(
    database_file: Path, levels: int, call: str
) -> None:
    """The same call inside a data change: its dry run (and, once approved, the change) ran on the event loop.
    (A dry run's own time limit, 5 s by default, is raised: on a busy machine the call may take longer.)"""
    database = SqliteDatabase(database_file, QueryLimits(preview_timeout=60.0))
    try:
        classification = await database.classify(delete_of(levels, call))
        assert not classification.read_only
        impact, longest = await watching_the_loop(lambda: database.preview(classification))
    finally:
        await database.aclose()
    assert impact.rows_affected == 0, impact.lines
    assert longest < 0.25, f"the event loop was held up for {longest:.3f} s"


@CALLS
async def test_the_time_limit_holds_for_a_superlinear_builtin_call(database_file: Path, levels: int, call: str) -> None:
    """Off the event loop, the interrupt lands only once the call returns: the read holds a reader (and the
    tool call) for as long as the call takes, minutes a few levels more, whatever `--statement-timeout` says."""
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=0.2))
    try:
        classification = await database.classify(read_of(levels, call))
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            await database.read(classification)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert elapsed < 0.7, f"a 0.2 s time limit stopped the statement after {elapsed:.2f} s"


async def test_the_time_limit_holds_while_classifying_a_long_statement(database_file: Path) -> None:
    """SQLite compiles a 135,000-value IN list in well under a second; the parser's view (sqlglot, Python) then
    takes seconds over it (2.4 s in all on a fast machine), in a worker thread that no interrupt stops: the
    call ends at the time limit (and its grace). The bound leaves room for the pauses the parser's thread
    causes on the event loop (up to about 0.2 s measured), far below the call's whole 2.4 s."""
    database = SqliteDatabase(database_file, QueryLimits(statement_timeout=1.0))
    statement = "SELECT count(*) FROM items WHERE id IN (" + ", ".join(map(str, range(135_000))) + ")"
    assert len(statement) <= MAX_STATEMENT_CHARS
    try:
        started = time.monotonic()
        with contextlib.suppress(QueryTimeout):
            await database.classify(statement)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert elapsed < 1.9, f"a 1 s time limit let classifying run for {elapsed:.2f} s"


async def test_a_statement_past_the_length_limit_is_refused_before_it_is_read(database_file: Path) -> None:
    database = SqliteDatabase(database_file, QueryLimits())
    statement = "SELECT count(*) FROM items WHERE id IN (" + ", ".join(map(str, range(200_000))) + ")"
    assert len(statement) > MAX_STATEMENT_CHARS
    try:
        started = time.monotonic()
        with pytest.raises(InvalidStatement, match="SQLite statements of up to 1,000,000 characters"):
            await database.classify(statement)
        elapsed = time.monotonic() - started
    finally:
        await database.aclose()
    assert elapsed < 0.5
