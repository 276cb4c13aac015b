"""JSON for a terminal: text that others wrote (servers, clients of the server) printed safely, and exactly."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_NOT_PRINTABLE_ASCII = re.compile(r"[^\n\x20-\x7e]")
_INVISIBLE_LETTERS_AND_MARKS = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
"""Unicode's default-ignorable characters outside the categories C and Z: a combining grapheme joiner, Hangul fillers,
inherent Khmer vowels and variation selectors draw nothing (or a blank) on their own."""


def visible_json(value: Any, **options: Any) -> str:
    """`value` as JSON (`options` as for `json.dumps`) that is safe to print in a terminal and reads back exactly.

    json.dumps escapes the C0 controls (ESC) but writes the rest as it is: DEL, C1 controls (U+009B is an 8-bit CSI
    to many terminals), bidi and other format characters, the other default-ignorable ones (variation selectors,
    Hangul fillers), line separators, spaces other than the ASCII one, private use and unassigned code points,
    which could rewrite the screen, reorder what a line shows or draw as nothing.
    Those are written as `\\u` escapes, as JSON allows inside any string; other text (`café`, `日本`) stays readable.
    """
    return _NOT_PRINTABLE_ASCII.sub(_escape_unless_visible, json.dumps(value, ensure_ascii=False, **options))


def _escape_unless_visible(found: re.Match[str]) -> str:
    # json.dumps writes such characters only inside strings (it escapes the C0 controls itself), so an escape is
    # valid wherever one is found.
    character = found[0]
    if unicodedata.category(character)[0] not in "CZ" and not _INVISIBLE_LETTERS_AND_MARKS.match(character):
        return character
    return json.dumps(character)[1:-1]  # ensure_ascii: \uXXXX, as a surrogate pair beyond the BMP
