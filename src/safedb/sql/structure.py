"""Statement structure as sqlglot sees it: the second opinion beside the database engine's own view."""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokenizer_core import Token, TokenType

from safedb.sql.classification import ChangeKind

logger = logging.getLogger(__name__)

# Statement forms that cannot change anything by themselves (the engine still has the last word).
_READ_FORMS: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values, exp.Pragma)
_READ_COMMANDS = frozenset({"EXPLAIN"})


@dataclass(frozen=True)
class StatementShape:
    """What a parser can say about a single statement's form."""

    root: str
    """sqlglot's name for the statement (`Select`, `Insert`, `Command:VACUUM`...), or `unparsed`."""
    read_form: bool
    insert_variant: ChangeKind | None = None
    """REPLACE or UPSERT when the statement is an insert of that flavour."""
    renamed_to: str | None = None
    """The new name of a table `ALTER TABLE ... RENAME TO` renames."""
    into_path: str | None = None
    """The literal file name of `VACUUM ... INTO 'file'`, when it is a plain string."""


# Shapes of statements up to this long are remembered (the most recent 1,024), so that a statement
# classified again is not parsed again; the limit keeps what the cache can hold small.
_REMEMBERED_STATEMENT_CHARS = 10_000


def statement_shape(sql: str, dialect: str, form: Callable[[str], str] | None = None) -> StatementShape:
    """Parse one statement; anything sqlglot cannot parse into exactly one statement has the root `unparsed`.

    `form` rewrites a statement short enough to be remembered into one of the same form (the same shape), which
    is parsed and remembered in its place, so that statements of one form are parsed once. Longer ones, which are
    not remembered, are parsed as they are."""
    if len(sql) <= _REMEMBERED_STATEMENT_CHARS:
        return _remembered_shape(sql if form is None else form(sql), dialect)
    return _shape(sql, dialect)


@functools.lru_cache(maxsize=1024)
def _remembered_shape(sql: str, dialect: str) -> StatementShape:
    return _shape(sql, dialect)


# Statements nesting parentheses deeper than this are not given to the parser. sqlglot recurses for each level
# (some 20 frames in Python, so that about 45 levels already raise RecursionError), and where it runs compiled
# (sqlglotc) some of its recursion has no depth check: 20,000 levels crash the process.
_PARSED_NESTING_LIMIT = 100


def _shape(sql: str, dialect: str) -> StatementShape:
    tokens = _tokens(sql, dialect)
    if tokens is None or _nested_too_deep(sql, tokens):
        return _unparsed(tokens)
    try:
        parsed = _dialect(dialect).parser().parse(tokens, sql)
    except Exception:  # a ParseError, RecursionError, or (compiled) a TypeError on some malformed input
        return _unparsed(tokens)
    # A trailing `;` followed by a comment parses as an empty Semicolon statement holding the comment.
    statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
    if len(statements) != 1:
        return _unparsed(tokens)
    root = statements[0]
    if isinstance(root, exp.Command):
        verb = str(root.this).upper()
        return StatementShape(
            root=f"Command:{verb}",
            read_form=verb in _READ_COMMANDS,
            insert_variant=ChangeKind.REPLACE if verb == "REPLACE" else None,
            into_path=_into_path(root, dialect) if verb == "VACUUM" else None,
        )
    return StatementShape(
        root=type(root).__name__,
        read_form=isinstance(root, _READ_FORMS),
        insert_variant=_insert_variant(root),
        renamed_to=_renamed_to(root),
    )


def _renamed_to(root: exp.Expr) -> str | None:
    if not isinstance(root, exp.Alter):
        return None
    renames = [action for action in root.args.get("actions") or () if isinstance(action, exp.AlterRename)]
    return str(renames[0].this.name) if renames else None


def _tokens(sql: str, dialect: str) -> list[Token] | None:
    """sqlglot's tokens of `sql`; None when it cannot tokenize the text."""
    try:
        return _dialect(dialect).tokenize(sql)
    except Exception:  # a TokenError, or whatever else the compiled tokenizer raises
        return None


@functools.cache
def _dialect(name: str) -> Dialect:
    return Dialect.get_or_raise(name)  # a new instance each time otherwise; it holds settings only


def _with_following(tokens: list[Token]) -> Iterator[tuple[Token, Token | None]]:
    """Each token with the one after it (None after the last)."""
    return itertools.zip_longest(tokens, tokens[1:])


def _nested_too_deep(sql: str, tokens: list[Token]) -> bool:
    """Past `_PARSED_NESTING_LIMIT`; only a text with that many `(` is read through to find out."""
    return sql.count("(") > _PARSED_NESTING_LIMIT and _nesting(tokens) > _PARSED_NESTING_LIMIT


def _nesting(tokens: list[Token]) -> int:
    depth = deepest = 0
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
            deepest = max(deepest, depth)
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1
    return deepest


def _unparsed(tokens: list[Token] | None) -> StatementShape:
    """What can still be told of a statement the parser rejects: the flavour of an insert, from its tokens (None
    when the text cannot be tokenized)."""
    return StatementShape(
        root="unparsed", read_form=False, insert_variant=None if tokens is None else _insert_variant_from_tokens(tokens)
    )


def says_replace(sql: str) -> bool:
    """Whether SQLite statement text uses REPLACE as a keyword (`REPLACE INTO`, `OR REPLACE`, `ON CONFLICT
    REPLACE`): not in a comment, a string or a name, nor as the `replace()` function. True when the text
    cannot be tokenized."""
    if "replace" not in sql.lower():
        return False  # the common case, without tokenizing
    tokens = _tokens(sql, "sqlite")
    if tokens is None:
        return True
    return any(
        token.token_type is TokenType.REPLACE and (following is None or following.token_type is not TokenType.L_PAREN)
        for token, following in _with_following(tokens)
    )


# Words that a parenthesis may follow in an expression without making it a function call.
_NOT_CALLS = frozenset(
    {"and", "or", "not", "in", "exists", "is", "cast", "case", "when", "then", "else", "between", "check"}
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
# Operators that call a function of the same name.
_OPERATOR_CALLS = frozenset({"like", "glob", "regexp", "match"})


def functions_in_checks(sql: str) -> frozenset[str] | None:
    """The functions (lower-cased names) that the CHECK constraints of an SQLite table definition call: the
    names followed by a parenthesis inside each CHECK (...), and the operators that call one (LIKE, GLOB...).
    Empty without a CHECK; None when the text cannot be tokenized."""
    if "check" not in sql.lower():
        return frozenset()  # the common case, without tokenizing
    tokens = _tokens(sql, "sqlite")
    if tokens is None:
        return None
    names: set[str] = set()
    depth = 0  # inside a CHECK's parentheses, how deep
    for token, following in _with_following(tokens):
        if depth == 0:
            if token.token_type is TokenType.VAR and token.text.lower() == "check":
                depth = -1  # its opening parenthesis comes next
            continue
        if token.token_type is TokenType.L_PAREN:
            depth = 1 if depth == -1 else depth + 1
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1
        elif token.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) and _NAME.fullmatch(token.text):
            word = token.text.lower()
            called = following is not None and following.token_type is TokenType.L_PAREN and word not in _NOT_CALLS
            if called or word in _OPERATOR_CALLS:
                names.add(word)
    return frozenset(names)


def _insert_variant_from_tokens(tokens: list[Token]) -> ChangeKind | None:
    """REPLACE or UPSERT from the statement's top-level words (outside parentheses), e.g. after a WITH clause."""
    depth = 0
    words: list[str] = []
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0:
            words.append(token.text.upper())
    verb = next((word for word in words if word in {"INSERT", "REPLACE", "UPDATE", "DELETE", "SELECT"}), None)
    if verb == "REPLACE" or (verb == "INSERT" and "OR" in words and "REPLACE" in words):
        return ChangeKind.REPLACE
    if verb == "INSERT" and "CONFLICT" in words and "UPDATE" in words:
        return ChangeKind.UPSERT
    return None


def _insert_variant(root: exp.Expr) -> ChangeKind | None:
    if not isinstance(root, exp.Insert):
        return None
    if str(root.args.get("alternative") or "").upper() == "REPLACE":
        return ChangeKind.REPLACE
    conflict = root.args.get("conflict")
    if isinstance(conflict, exp.OnConflict) and "UPDATE" in str(conflict.args.get("action") or "").upper():
        return ChangeKind.UPSERT
    return None


def _into_path(command: exp.Command, dialect: str) -> str | None:
    rest = command.expression
    text = rest.this if isinstance(rest, exp.Literal) else str(rest or "")
    tokens = _tokens(text, dialect)
    if tokens is None:
        return None
    for index, token in enumerate(tokens[:-1]):
        if token.token_type is TokenType.INTO:
            following = tokens[index + 1 :]
            if len(following) == 1 and following[0].token_type is TokenType.STRING:
                return following[0].text
            return None
    return None
