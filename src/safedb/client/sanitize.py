"""Server-supplied text made safe to print in a terminal: no escape sequences, no control or invisible characters.

A message could otherwise clear the screen, move the cursor over the real question, set the window
title, reorder text with bidirectional overrides, or hide text with characters that draw nothing.
"""

from __future__ import annotations

import re
import unicodedata

_ESCAPE_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: cursor movement, colours, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks, clipboard
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # two-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_KEPT_FORMAT_CHARACTERS = frozenset(
    "\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
)
"""Format characters (category Cf) that are kept: Unicode's prepended concatenation marks (such as the Arabic number
sign), which are drawn, spanning the digits after them, so they cannot hide anything. (The joiners are kept where
a script or an emoji sequence needs them, see `_is_hidden`.)"""
_RESERVED_INVISIBLE = frozenset("\u2065" + "".join(map(chr, range(0xFFF0, 0xFFF9))))
"""Unassigned code points that Unicode reserves as default-ignorable, to be shown as nothing once assigned (the
unassigned tags are removed with the rest of their block, below)."""
_BLANK_LETTERS_AND_MARKS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0")
"""Default-ignorable characters that are not format characters: the combining grapheme joiner, the Hangul fillers
and the inherent Khmer vowels draw nothing or a blank (`DR\u034fOP` reads as DROP)."""
_VARIATION_SELECTORS = frozenset([*map(chr, range(0xFE00, 0xFE10)), *map(chr, range(0xE0100, 0xE01F0))])
_MONGOLIAN_VARIATION_SELECTORS = frozenset("\u180b\u180c\u180d\u180f")
_JOINERS = frozenset("\u200c\u200d")
_INVISIBLE_TO_RULES = _VARIATION_SELECTORS | _MONGOLIAN_VARIATION_SELECTORS | _JOINERS
_TAGS_OUTSIDE_FLAGS = re.compile(
    "(\U0001f3f4[\U000e0061-\U000e007a]{2}[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,4}\U000e007f)"
    "|[\U000e0000-\U000e007f]"
)
"""Tag characters are invisible copies of ASCII, which can smuggle text past the reader; the only use Unicode
recommends is an emoji subdivision flag (the black flag, a subdivision code such as `gbeng`, the cancel tag)."""
_LINE_SEPARATORS = frozenset("\n\u2028\u2029")

# More blanks in a row than this, or more empty lines, are named with their count, as the approval question SafeDB's
# server asks names them in a statement (`safedb.approval.display`). Its patterns do not fit text `clean_text` left:
# that keeps every space character (a statement's other spaces are named one by one there), and all draw blank.
_MAX_BLANKS = 8
_MAX_EMPTY_LINES = 2
_BLANK = r"(?:[^\S\n]|\u2800)"  # a space of any width, or the blank Braille pattern, which draws as one
_BLANK_RUN = re.compile(rf"{_BLANK}{{{_MAX_BLANKS + 1},}}")
_EMPTY_LINES = re.compile(rf"\n(?:{_BLANK}*\n){{{_MAX_EMPTY_LINES + 1},}}")


def clean_text(text: str, *, multiline: bool = True) -> str:
    """The text without escape sequences and control characters; tabs become spaces.

    With `multiline=False` line breaks become spaces too, for names and one-line labels.
    """
    text = _ESCAPE_SEQUENCES.sub("", text).replace("\r\n", "\n").replace("\t", "    ")
    text = _TAGS_OUTSIDE_FLAGS.sub(lambda flag: flag[1] or "", text)
    kept: list[str] = []
    for character in text:
        if character in _LINE_SEPARATORS:  # U+2028/U+2029 break lines too, where terminals show nothing
            kept.append("\n" if multiline else " ")
        elif not _is_hidden(character, kept[-1] if kept else ""):
            kept.append(character)
    return "".join(kept)


def shown_text(text: str, *, multiline: bool = True) -> str:
    """`clean_text`, with runs of more than 8 blanks named as `⟨3,000 blanks⟩` and of more than 2 empty lines as
    `⟨120 line breaks⟩`: text that draws as nothing cannot push what the client shows around a server's text (the
    `Server:` line above a question) out of view, or wrap a name across the screen."""
    text = named_empty_lines(clean_text(text, multiline=multiline))
    return _BLANK_RUN.sub(lambda run: f"⟨{len(run.group()):,} blanks⟩", text)


def named_empty_lines(text: str) -> str:
    """`text` with runs of more than 2 empty lines named as `⟨120 line breaks⟩`; blanks within lines kept, for text
    whose spacing means something (a tool's result: code, aligned columns)."""
    return _EMPTY_LINES.sub(lambda run: f"\n⟨{run.group().count(chr(10)):,} line breaks⟩\n", text)


def text_as_read(text: str) -> str:
    """The text as a person reads it once cleaned, for rules to match: compatibility forms folded (NFKC: full-width
    `\uff24\uff32\uff2f\uff30` is DROP), every space an ASCII space, and no joiners or variation selectors, which
    a script or an emoji needs but which only tell apart words that read alike (`DR\ufe0fOP`)."""
    folded = unicodedata.normalize("NFKC", clean_text(text))
    return "".join(
        " " if unicodedata.category(character) == "Zs" else character
        for character in folded
        if character not in _INVISIBLE_TO_RULES
    )


def _is_hidden(character: str, previous: str) -> bool:
    """Whether the character, after `previous`, is a control, a surrogate or private-use character, or invisible.

    Format characters (Cf) draw nothing, yet change what a string is: bidi controls reorder text, zero-width and
    invisible ones hide text or tell two strings that look alike apart (`ad\u00admin` is not `admin`). All go
    but the few that scripts need, and those only where a script could need them; a tag character reaching here
    is part of a subdivision flag.
    """
    if character in _JOINERS:  # between the letters of Persian or an Indic script, or in an emoji sequence
        return previous.isascii()
    if character in _VARIATION_SELECTORS:  # an emoji's or a symbol's style, or a CJK ideograph's variant
        return not (unicodedata.category(previous) in ("So", "Sm") or unicodedata.name(previous, "").startswith("CJK"))
    if character in _MONGOLIAN_VARIATION_SELECTORS:
        return not "\u1820" <= previous <= "\u18aa"
    category = unicodedata.category(character)
    if category == "Cf":
        return character not in _KEPT_FORMAT_CHARACTERS and not "\U000e0020" <= character <= "\U000e007f"
    return (
        category in ("Cc", "Cs", "Co")
        or character in _RESERVED_INVISIBLE
        or character in _BLANK_LETTERS_AND_MARKS
        or (category == "Cn" and "\U000e0000" <= character <= "\U000e0fff")  # reserved as default-ignorable
    )
