"""The client's command lines split as `shlex.split` splits them (POSIX quoting), in time that grows with the line:
shlex took minutes over a pasted statement of a few megabytes, and Ctrl-C could not stop it."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safedb.client.targets import stdio_target
from safedb.client.words import split_words

# The characters that quoting is about, and some that it is not (a non-breaking space is no blank to a shell).
_LINES = st.text(alphabet=st.sampled_from(" \t\r\n'\"\\ab$`\u00a0é#"), max_size=40)


def _split(split: object, line: str) -> list[str] | str:
    try:
        return split(line)  # type: ignore[operator, no-any-return]
    except ValueError as exc:
        return f"ValueError: {exc}"


@settings(max_examples=3000, deadline=None)
@given(_LINES)
def test_lines_split_as_shlex_splits_them(line: str) -> None:
    assert _split(split_words, line) == _split(shlex.split, line)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("call execute_query 'query=DELETE FROM t'", ["call", "execute_query", "query=DELETE FROM t"]),
        ('a "" b', ["a", "", "b"]),
        ('q="it\'s \\"quoted\\" \\n"', ['q=it\'s "quoted" \\n']),
        ("a\\ b\\\\c", ["a b\\c"]),
        ("\u00a0", ["\u00a0"]),
    ],
)
def test_quotes_and_backslashes_work_as_in_a_shell(line: str, words: list[str]) -> None:
    assert split_words(line) == words


@pytest.mark.parametrize(("line", "error"), [("'open", "No closing quotation"), ("end\\", "No escaped character")])
def test_an_unfinished_line_is_an_error(line: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        split_words(line)


def test_a_pasted_statement_of_megabytes_is_one_word() -> None:
    statement = "INSERT INTO t VALUES " + ", ".join(f"({n}, 'it''s \\ row {n}')" for n in range(100_000))
    line = f'call execute_query "query={statement}"'
    assert split_words(line) == ["call", "execute_query", f"query={statement}"]


def test_a_stdio_command_is_split_the_same_way() -> None:
    target = stdio_target("safedb serve --database 'my data.db'")
    assert (target.command, target.args) == ("safedb", ("serve", "--database", "my data.db"))
