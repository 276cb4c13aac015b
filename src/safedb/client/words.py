"""A typed line split into words as a POSIX shell splits them, the way `shlex.split` does, in time that grows with
the line's length: `shlex` builds each word a character at a time, in time that grows with the square of its
length, so a statement of a few megabytes pasted at the prompt held it for minutes, deaf to Ctrl-C."""

from __future__ import annotations

import re

_PIECE = re.compile(
    r"""
      (?P<plain>[^ \t\r\n'"\\]+)
    | \\(?P<escaped>.)
    | '(?P<single>[^']*)'
    | "(?P<double>(?:[^"\\]++|\\.)*+)"
    | (?P<space>[ \t\r\n]+)
    | (?P<unclosed>['"\\])
    """,
    re.DOTALL | re.VERBOSE,
)
_ESCAPED_IN_DOUBLE_QUOTES = re.compile(r"\\(.)", re.DOTALL)


def split_words(line: str) -> list[str]:
    """The words of `line`: blanks (space, tab, line breaks) split them; quotes and backslashes work as in `sh`.
    ValueError, with `shlex`'s words, for an unclosed quote or a backslash at the end."""
    words: list[str] = []
    pieces: list[str] | None = None  # of the word being read; None between words ('' is a word)
    for match in _PIECE.finditer(line):
        kind = match.lastgroup
        text = match[kind or 0]
        if kind == "space":
            if pieces is not None:
                words.append("".join(pieces))
                pieces = None
            continue
        if kind == "unclosed":
            raise ValueError(_unclosed(text, line[match.end() :]))
        if kind == "double":
            # Within double quotes a backslash escapes only a double quote or a backslash; before anything else
            # it is itself.
            text = _ESCAPED_IN_DOUBLE_QUOTES.sub(lambda m: m[1] if m[1] in '"\\' else m[0], text)
        if pieces is None:
            pieces = []
        pieces.append(text)
    if pieces is not None:
        words.append("".join(pieces))
    return words


def _unclosed(opening: str, rest: str) -> str:
    """shlex's words for a line that ends within a quote or an escape (`opening`, then `rest`): a backslash escapes the
    end of the line itself, or the end of the double quotes it ends."""
    escapes_the_end = opening == "\\" or (opening == '"' and (len(rest) - len(rest.rstrip("\\"))) % 2 == 1)
    return "No escaped character" if escapes_the_end else "No closing quotation"
