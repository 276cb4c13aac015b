"""SQLite statement text as tokens, by SQLite's own rules (tokenize.c), for reading names out of it."""

from __future__ import annotations

import re
from collections.abc import Iterator

# ASCII blanks only; every character past ASCII may be part of a name; strings, blobs, numbers and comments
# name nothing; an unterminated comment runs to the end.
_TOKEN = re.compile(
    r"""
      (?P<skip> [ \t\n\f\r]+ | --[^\n]* | /\*.*?(?:\*/|\Z) | [xX]'[^']*'? | '(?:[^']|'')*'? | [0-9][0-9A-Za-z_.]* )
    | (?P<quoted> "(?:[^"]|"")*"? | \[[^\]]*\]? | `(?:[^`]|``)*`? )
    | (?P<word> [A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]* )
    | (?P<mark> . )
    """,
    re.VERBOSE | re.DOTALL,
)
_CLOSING_QUOTE = {'"': '"', "`": "`", "[": "]"}


# A token: a name (lower-cased, unquoted) with `WORD` or `QUOTED`, or one punctuation character with `MARK`.
MARK, WORD, QUOTED = 0, 1, 2
Token = tuple[str, int]


def sql_tokens(sql: str) -> Iterator[Token]:
    """The names and punctuation of `sql`, in order (strings, numbers, blanks and comments left out)."""
    return (token for token, _ in located_tokens(sql))


def located_tokens(sql: str) -> Iterator[tuple[Token, int]]:
    """`sql_tokens`, each with the offset in `sql` where it starts."""
    for match in _TOKEN.finditer(sql):
        kind, text = match.lastgroup, match.group()
        if kind == "quoted":
            quote = text[0]
            end = _CLOSING_QUOTE[quote]
            inner = text[1:-1] if len(text) > 1 and text.endswith(end) else text[1:]
            yield ((inner if quote == "[" else inner.replace(quote * 2, quote)).lower(), QUOTED), match.start()
        elif kind == "word":
            yield (text.lower(), WORD), match.start()
        elif kind == "mark":
            yield (text, MARK), match.start()


def with_integers_as_zero(sql: str) -> str:
    """`sql` with every integer literal (a token of ASCII digits only) written as `0`; strings, blobs, quoted names,
    comments, and numbers with a point, an exponent or letters, left as they are. The parser's reading of a
    statement's form (`statement_shape`) does not depend on such numbers, so texts that differ only in them (the
    same query for another id) are parsed once (its `form`)."""
    return _TOKEN.sub(_zero_if_integer, sql)


def _zero_if_integer(match: re.Match[str]) -> str:
    text = match.group()
    return "0" if match.lastgroup == "skip" and text.isascii() and text.isdigit() else text


def is_keyword(token: Token, word: str) -> bool:
    return token[1] == WORD and token[0] == word


def is_mark(token: Token, mark: str) -> bool:
    return token[1] == MARK and token[0] == mark
