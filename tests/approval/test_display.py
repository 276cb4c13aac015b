"""The statement as the person approving it sees it: nothing out of sight, nothing reordered."""

from __future__ import annotations

import pytest

from safedb.approval.display import readable_length, visible_statement


@pytest.mark.parametrize(
    ("sql", "shown"),
    [
        ("DELETE FROM t WHERE id = 2" + " " * 3000 + "OR 1=1", "DELETE FROM t WHERE id = 2⟨3,000 blanks⟩OR 1=1"),
        ("DELETE FROM t" + "\t " * 10 + "WHERE true", "DELETE FROM t⟨20 blanks⟩WHERE true"),
        ("DELETE FROM t" + "\n" * 200 + "WHERE true", "DELETE FROM t\n⟨200 line breaks⟩\nWHERE true"),
        ("SELECT 'void\u202e ' OR 1=1 OR '\u202c'", "SELECT 'void⟨U+202E⟩ ' OR 1=1 OR '⟨U+202C⟩'"),
        ("DELETE FROM t\u200b\u2066 WHERE id\u2028= 1", "DELETE FROM t⟨U+200B⟩⟨U+2066⟩ WHERE id⟨U+2028⟩= 1"),
        ("DELETE FROM t WHERE id = 1\rDELETE FROM t", "DELETE FROM t WHERE id = 1⟨U+000D⟩DELETE FROM t"),
        ("DELETE FROM t\x1b[2K WHERE id = 1", "DELETE FROM t⟨U+001B⟩[2K WHERE id = 1"),
        # Not spaces, but blank on screen: Hangul fillers, the blank Braille pattern.
        (
            "DELETE FROM t WHERE id = 2 /*" + "\u3164" * 3000 + "*/ OR 1 = 1",
            "DELETE FROM t WHERE id = 2 /*⟨U+3164, 3,000 times⟩*/ OR 1 = 1",
        ),
        (
            "DELETE FROM t /*" + "\u2800\n" * 300 + "*/ OR 1 = 1",
            "DELETE FROM t /*" + "⟨U+2800⟩\n" * 300 + "*/ OR 1 = 1",
        ),
        ("SELECT '\u115f\u1160\uffa0'", "SELECT '⟨U+115F⟩⟨U+1160⟩⟨U+FFA0⟩'"),
        ("DELETE FROM t\u200b\u200b\u200b" + "\u200b" * 20, "DELETE FROM t⟨U+200B, 23 times⟩"),
        # Marks stacked on one character grow over the lines above and below it, covering them.
        ("DELETE FROM t /*a" + "\u0301" * 300 + "*/", "DELETE FROM t /*a⟨300 combining marks⟩*/"),
        ("DELETE FROM t -- " + "x\u0300\u0301\u0302\u0303\u0304\u0305", "DELETE FROM t -- x⟨6 combining marks⟩"),
        # Drawn across or around their character: struck through, `OR 1=1` reads as taken out.
        ("DELETE FROM t WHERE id = 2 O\u0336R\u0336 1=1", "DELETE FROM t WHERE id = 2 O⟨U+0336⟩R⟨U+0336⟩ 1=1"),
        ("DELETE FROM t WHERE 1=1\u20e0", "DELETE FROM t WHERE 1=1⟨U+20E0⟩"),
    ],
)
def test_what_could_hide_part_of_a_statement_is_named(sql: str, shown: str) -> None:
    assert visible_statement(sql) == shown


def test_ordinary_layout_and_text_are_shown_as_written() -> None:
    # Vietnamese and Devanagari carry up to two marks a letter; `e` and a combining acute, decomposed.
    sql = "UPDATE t\r\n   SET name = 'Zoë — ok', v = 'Tiê\u0301ng Việt नमस्ते e\u0301'\n\n\tWHERE id = 1   -- note"
    assert visible_statement(f"  {sql}\n") == sql.replace("\r\n", "\n")


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("GDPR erasure request", 20),
        ("  padded  ", 6),
        ("\u200b" * 12, 0),
        ("\u2066\u2069 ok \u200b", 2),
        ("", 0),
        ("\u3164" * 12, 0),
        ("\ufe0f" * 12, 0),
        ("\U000e0100" * 12, 0),
        ("\u0301" * 12, 0),
        ("Zoe\u0301 approved", 12),
        ("a" + " " * 24 + "b", 3),  # a run of blanks or line breaks counts as one
        ("a\n\n\n\t b", 3),
    ],
)
def test_readable_length_counts_what_a_person_can_read(text: str, length: int) -> None:
    assert readable_length(text) == length


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_character_shows_as_itself_unless_it_is_a_control(code: int) -> None:
    character = chr(code)
    shown = visible_statement(f"SELECT 'a{character}b'")
    if (code < 32 and character not in "\n\t") or code == 127:
        assert shown == f"SELECT 'a⟨U+{code:04X}⟩b'"
    else:
        assert shown == f"SELECT 'a{character}b'"
