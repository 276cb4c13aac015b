"""How a statement is shown to the person who approves it: every character in sight, none hiding another.

Text that renders as nothing or out of sight could make the statement a person reads differ from the one
that runs: thousands of spaces that push `OR 1=1` past the right edge, hundreds of line breaks below it,
bidirectional controls that reorder what is displayed, zero-width characters, a carriage return that
overwrites a terminal line, a no-break space that reads as a gap but is part of a name to the database. The shown
text names those instead (the statement that runs is unchanged).
"""

from __future__ import annotations

import itertools
import re
import unicodedata

import anyio.to_thread

from safedb.inline_work import INLINE_STATEMENT_CHARS

# More blanks in a row than this, or more empty lines, are named with their count instead.
_MAX_BLANKS = 8
_MAX_EMPTY_LINES = 2

_BLANK_RUN = re.compile(rf"[ \t]{{{_MAX_BLANKS + 1},}}")
_EMPTY_LINES = re.compile(rf"\n(?:[ \t]*\n){{{_MAX_EMPTY_LINES + 1},}}")
# What both SQLite's and PostgreSQL's scanners take for white space around a statement. Other spaces (a no-break
# space, U+3000...) are part of a name to them: `DELETE FROM ledger` + U+00A0 deletes from another table than
# `ledger`, so those are named (`_hidden`), never stripped or counted as blanks.
_SQL_SPACE = " \t\n\r\f"
# Controls, format characters (bidi, zero-width), line and paragraph separators, private and unassigned (and
# every space but U+0020: `_SQL_SPACE`).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})
_SHOWN_AS_IS = frozenset({"\n", "\t"})
# Letters and symbols that render as blank space without being spaces (Hangul fillers, the blank Braille
# pattern, Khmer inherent vowels, the combining grapheme joiner): 3,000 of them push text out of sight too.
_BLANK_LOOKING = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
# Combining marks (accents, variation selectors...): each goes on the character before it, and alone shows nothing
# a person can read, so a justification's length counts them with their letter, not on their own.
_MARK_CATEGORIES = frozenset({"Mn", "Me"})
# Marks one character may carry as they are (a letter of any script needs a few); a longer run stacks up over the
# lines above and below, covering them, and is named with its count instead.
_MAX_MARKS = 4
# Marks drawn across or around their character (strike-through and slash overlays, enclosing circles): `OR 1=1`
# struck through reads as taken out while it runs.
_OVERLAY_CLASS = 1
# The only ASCII characters that hide: the controls other than a line break and a tab.
_ASCII_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def visible_statement(sql: str) -> str:
    """`sql` as it must be shown before approval: hidden characters as `⟨U+202E⟩` (a long run of one as
    `⟨U+3164, 3,000 times⟩`), long runs of blanks as `⟨3,000 blanks⟩`, of empty lines as `⟨200 line breaks⟩`, of
    combining marks on one character as `⟨200 combining marks⟩`."""
    text = sql.strip(_SQL_SPACE).replace("\r\n", "\n")
    text = _EMPTY_LINES.sub(lambda run: f"\n⟨{run.group().count(chr(10)):,} line breaks⟩\n", text)
    text = _BLANK_RUN.sub(lambda run: f"⟨{len(run.group()):,} blanks⟩", text)
    if text.isascii() and _ASCII_HIDDEN.search(text) is None:
        return text  # the usual statement: nothing in it hides, and looking at each character costs
    shown = []
    for is_mark, run in itertools.groupby(text, lambda character: unicodedata.category(character) in _MARK_CATEGORIES):
        characters = "".join(run)
        if is_mark and len(characters) > _MAX_MARKS:
            shown.append(f"⟨{len(characters):,} combining marks⟩")
        else:
            shown.extend(_shown(character, len(list(same))) for character, same in itertools.groupby(characters))
    return "".join(shown)


def visible_line(text: str) -> str:
    """`text` as one line of a question: shown as `visible_statement` shows a statement, with its line breaks named
    too, so that what comes from the database (an error message, a table's name) cannot begin a line of its own
    that reads as one of SafeDB's (`Impact: ... holds for exactly 1 row`)."""
    return visible_statement(text).replace("\n", "⟨U+000A⟩")


async def visible_statement_soon(sql: str) -> str:
    """`visible_statement` from the event loop: in a worker thread for a long text that is not plain ASCII, whose
    characters it looks at one by one (0.8 s for a million), which would hold up every other call."""
    if len(sql) <= INLINE_STATEMENT_CHARS or sql.isascii():
        return visible_statement(sql)
    return await anyio.to_thread.run_sync(visible_statement, sql)


def readable_length(text: str) -> int:
    """How many characters of `text` a person can read: hidden characters, combining marks and surrounding blanks do
    not count, and a run of blanks or line breaks counts as one space (ten zero-width spaces, ten variation
    selectors, or `a`, 24 spaces and `b`, are not a justification of ten or more)."""
    readable = "".join(c for c in text if not _hidden(c) and unicodedata.category(c) not in _MARK_CATEGORIES)
    return len(" ".join(readable.split()))


def _shown(character: str, times: int) -> str:
    if not _hidden(character):
        return character * times
    name = f"U+{ord(character):04X}"
    return f"⟨{name}, {times:,} times⟩" if times > _MAX_BLANKS else f"⟨{name}⟩" * times


def _hidden(character: str) -> bool:
    if character in _BLANK_LOOKING or unicodedata.combining(character) == _OVERLAY_CLASS:
        return True
    category = unicodedata.category(character)
    if category == "Zs":
        return character != " "
    return category == "Me" or (character not in _SHOWN_AS_IS and category in _HIDDEN_CATEGORIES)
