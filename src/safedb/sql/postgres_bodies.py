"""The statements a user-defined function's body runs, read from its definition (`pg_get_functiondef`).

PostgreSQL does not enforce a function's volatility label: a function labelled stable may still end
sessions or take advisory locks. So a read that calls a user-defined function is judged by what the
function's body calls (`safedb.db.postgres.function_bodies`), which this module reads: each statement of an
SQL function (a string body or `BEGIN ATOMIC`), and each SQL expression and statement of a PL/pgSQL one.
A body that builds SQL at run time (`EXECUTE`), or is written in another language, cannot be examined.
Pure: no connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pglast import ast, parse_plpgsql
from pglast.parser import ParseError
from pglast.stream import RawStream

from safedb.errors import SafeDBError
from safedb.sql.postgres_classifier import PostgresStatement, analyze_statement, parse_statements

EXAMINED_LANGUAGES = frozenset({"sql", "plpgsql"})

# How PL/pgSQL parses each expression (libpg_query's `parseMode`): a whole statement, an expression, or an
# assignment (`target := expression`, the target possibly qualified or subscripted).
_STATEMENT_MODE = 0
_EXPRESSION_MODE = 2
_ASSIGNMENT_MODES = frozenset({3, 4, 5})

# PL/pgSQL statements whose SQL is a string made at run time.
_DYNAMIC_STATEMENTS = frozenset({"PLpgSQL_stmt_dynexecute", "PLpgSQL_stmt_dynfors"})


class Unexaminable(Exception):
    """The body cannot be examined; the message says why, to follow "it" (the function)."""


@dataclass(frozen=True)
class Body:
    statements: tuple[PostgresStatement, ...]
    """Every statement the body may run."""
    declares_variables: bool = False
    """It declares PL/pgSQL variables, whose types the parser cannot always name (it knows no catalog), and
    assigning to one converts the value to its type."""


def read_body(language: str, definition: str) -> Body:
    """The body of the function `definition` (a `CREATE FUNCTION` statement).

    Raises:
        Unexaminable: another language, SQL built at run time, or text the parser or classifier refuses.
    """
    if language not in EXAMINED_LANGUAGES:
        raise Unexaminable(f"is written in {language}, whose code SafeDB cannot examine")
    try:
        if language == "plpgsql":
            (function,) = parse_plpgsql(definition)
            texts = list(_plpgsql_texts(function))
            return Body(tuple(map(analyze_statement, texts)), _declares_variables(function))
        return Body(tuple(map(analyze_statement, _sql_texts(definition))))
    except (ParseError, ValueError) as exc:
        raise Unexaminable(f"has a body SafeDB cannot parse ({exc})") from None
    except RecursionError:
        # Writing a `BEGIN ATOMIC` body's statements back as text recurses once per level of an expression.
        raise Unexaminable("has a body nested too deeply for SafeDB to examine") from None
    except SafeDBError as exc:
        first_sentence = str(exc).split(". ")[0].rstrip(".")
        raise Unexaminable(f"runs a statement SafeDB would refuse ({first_sentence})") from None


def _sql_texts(definition: str) -> Iterator[str]:
    (raw,) = parse_statements(definition)
    create = raw.stmt
    if not isinstance(create, ast.CreateFunctionStmt):
        raise ValueError("not a function definition")
    if create.sql_body:  # BEGIN ATOMIC ... END: stored as parsed statements
        for statements in create.sql_body:
            for statement in statements or ():
                yield RawStream()(statement)
        return
    for option in create.options or ():
        if option.defname == "as":
            (body,) = option.arg  # one string: an SQL function's body
            yield from _statement_texts(body.sval)


def _statement_texts(body: str) -> Iterator[str]:
    for raw in parse_statements(body):
        start = raw.stmt_location or 0
        yield body[start : start + raw.stmt_len] if raw.stmt_len else body[start:]


def _declares_variables(function: dict[str, Any]) -> bool:
    # Declared variables carry the line they are declared on; parameters and `found` do not.
    return any("lineno" in datum for item in function["PLpgSQL_function"]["datums"] for datum in item.values())


def _plpgsql_texts(function: dict[str, Any]) -> Iterator[str]:
    for mode, query in _plpgsql_expressions(function):
        if mode == _STATEMENT_MODE:
            yield query
        elif mode == _EXPRESSION_MODE:
            yield f"SELECT {query}"
        elif mode in _ASSIGNMENT_MODES:
            # `x[f(y)] := g(z)` as `SELECT x[f(y)], g(z)`: the target's subscripts run too.
            target, separator, value = query.partition(":=")
            if not separator:
                target, separator, value = query.partition("=")
            yield f"SELECT {target}, {value}"
        else:
            raise ValueError(f"an expression of an unknown kind ({mode})")


def _plpgsql_expressions(node: object) -> Iterator[tuple[int, str]]:
    """(parse mode, text) of every SQL expression and statement in a PL/pgSQL function's parse tree."""
    if isinstance(node, list):
        for item in node:
            yield from _plpgsql_expressions(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in _DYNAMIC_STATEMENTS or key == "dynquery":
                raise Unexaminable("runs SQL built at run time (EXECUTE), which SafeDB cannot examine")
            if key == "PLpgSQL_expr":
                yield value.get("parseMode", _STATEMENT_MODE), value["query"]
            else:
                yield from _plpgsql_expressions(value)
