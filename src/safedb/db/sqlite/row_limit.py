"""A read told in SQL how many rows SafeDB will keep, so that SQLite computes no more than those.

SafeDB keeps at most `max_rows` rows of a result, but a query does not know that: one sorting 1,000,000 rows
sorted them all, in memory (about 120 MiB and 1.3 s), to hand over the first 500. With a LIMIT of 501 after
it, SQLite keeps only the first 501 while it reads (16 MiB, 0.2 s). They are the rows SafeDB would have kept,
except that among rows that tie in the sort order SQLite may keep others (SQL leaves their order open). Rows
that do not make the cut may not be computed at all, so an error that only such a row would raise (a malformed
JSON value, say) no longer fails the read, as an error past the cap never did.

The LIMIT is an expression, `CAST(501 AS INTEGER)`, not the number: SQLite's planner takes a number as a hint
and may then choose another plan, one that stops early for a few rows but builds a costly subquery whole first
(0.00 s as written, 12.6 s with `LIMIT 501`, in a test). An expression is left to run time, where it still
bounds the sort, and the plan stays the one of the statement as written.

Only the text that runs gets the LIMIT; the statement classified and recorded is the one the caller wrote.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator

from safedb.db.sqlite.tokens import MARK, WORD, Token, located_tokens
from safedb.inline_work import INLINE_STATEMENT_CHARS

# What SQLite says when the LIMIT cannot follow the query, as after a compound ending in VALUES.
_LIMIT_REFUSED = 'near "LIMIT": syntax error'


def execute_read(connection: sqlite3.Connection, statement: str, rows: int) -> sqlite3.Cursor:
    """Run the read-only `statement` for at most `rows` rows: limited where SQLite takes a LIMIT after it."""
    short = len(statement) <= INLINE_STATEMENT_CHARS
    limited = _remembered_row_limit(statement, rows) if short else with_row_limit(statement, rows)
    if limited is not None:
        try:
            return connection.execute(limited)
        except sqlite3.OperationalError as exc:
            if str(exc) != _LIMIT_REFUSED:
                raise
    return connection.execute(statement)


def with_row_limit(statement: str, rows: int) -> str | None:
    """`statement` with a LIMIT of `rows` after it, when it is a query (`SELECT`, or `WITH` and then one) with
    no LIMIT of its own; None otherwise. A closing `;` and what follows it are left out.

    A LIMIT after a whole query can only be the query's own: every nested query, and each `WITH` part, is in
    parentheses. SQLite may still refuse it (a compound ending in `VALUES` takes none), which `execute_read`
    catches.
    """
    tokens = located_tokens(statement)
    first = next(tokens, None)
    if first is None or first[0] not in (("select", WORD), ("with", WORD)):
        return None
    # Most reads have neither a `;` nor a LIMIT anywhere, and need no more reading (every new text is read).
    needs_reading = ";" in statement or "limit" in statement.lower()
    end = _end_without_limit(tokens, len(statement)) if needs_reading else len(statement)
    if end is None:
        return None
    # On a line of its own: the query may end in a `--` comment.
    return f"{statement[:end]}\nLIMIT CAST({int(rows)} AS INTEGER)"


def _end_without_limit(tokens: Iterator[tuple[Token, int]], length: int) -> int | None:
    """Where the query whose first token was taken from `tokens` ends: its closing `;`, else `length`. None when it
    has a LIMIT of its own."""
    depth = 0
    for (text, kind), start in tokens:
        if kind == MARK:
            if text == "(":
                depth += 1
            elif text == ")":
                depth -= 1
            elif text == ";" and depth == 0:
                return start
        elif kind == WORD and text == "limit" and depth == 0:
            return None
    return length


# The statements short enough to run on the event loop have their limited texts remembered, since every read
# asks; at most some 8 MB of them.
_remembered_row_limit = functools.lru_cache(maxsize=1024)(with_row_limit)
