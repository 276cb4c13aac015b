"""Server-supplied text made safe to print in a terminal: no escape sequences, no control characters.

A message could otherwise clear the screen, move the cursor over the real question, set the window
title, or reorder text with bidirectional overrides.
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
_BIDI_AND_INVISIBLE = frozenset("\u061c\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")
"""Every bidirectional control (Unicode's Bidi_Control: marks, embeddings, overrides, isolates), the zero-width
space and U+FEFF."""
_LINE_SEPARATORS = frozenset("\n\u2028\u2029")


def clean_text(text: str, *, multiline: bool = True) -> str:
    """The text without escape sequences and control characters; tabs become spaces.

    With `multiline=False` line breaks become spaces too, for names and one-line labels.
    """
    text = _ESCAPE_SEQUENCES.sub("", text).replace("\r\n", "\n").replace("\t", "    ")
    kept = []
    for character in text:
        if character in _LINE_SEPARATORS:  # U+2028/U+2029 break lines too, where terminals show nothing
            kept.append("\n" if multiline else " ")
        elif character in _BIDI_AND_INVISIBLE or unicodedata.category(character) in ("Cc", "Cs", "Co"):
            continue
        else:
            kept.append(character)
    return "".join(kept)
