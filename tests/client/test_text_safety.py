"""Server text shown in the terminal is cleaned; URLs are reviewed before anything is opened (pure)."""

from __future__ import annotations

import pytest

from safedb.client.sanitize import clean_text
from safedb.client.urls import review_url


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain\nlines", "plain\nlines"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("title\x1b]0;pwned\x07 here", "title here"),
        ("link \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "link click"),
        ("clear\x1b[2J\x1b[Hscreen", "clearscreen"),
        ("bell\x07 and back\x08space", "bell and backspace"),
        ("carriage\rreturn", "carriagereturn"),
        ("tab\there", "tab    here"),
        ("right\u202eto left", "rightto left"),
        ("8-bit \x9b31mcsi", "8-bit csi"),
        ("naïve café ✓", "naïve café ✓"),
    ],
)
def test_escape_sequences_and_control_characters_are_removed(text: str, shown: str) -> None:
    assert clean_text(text) == shown


def test_single_line_cleaning_joins_lines() -> None:
    assert clean_text("a\nb", multiline=False) == "a b"


@pytest.mark.parametrize(
    ("url", "host", "openable"),
    [
        ("https://approve.example.com/x?id=1", "approve.example.com", True),
        ("http://127.0.0.1:8000/approve", "127.0.0.1", True),
        ("http://localhost/approve", "localhost", True),
        ("http://[::1]:9/a", "::1", True),
        ("http://example.com/approve", "example.com", False),
        ("javascript:alert(1)", "", False),
        ("file:///etc/passwd", "", False),
        ("https://good.example.com@evil.example/", "evil.example", False),
        ("https://ex\u0430mple.com/", "xn--exmple-4nf.com", True),  # Cyrillic a
        ("https://example.com/\x1b[2Jx", "", False),
        ("https://p\u0430ypal\u2061.com/login", "p\\u0430ypal\\u2061.com", False),  # an invisible letter
        ("https://stra\u00dfe.de/", "stra\\xdfe.de", False),  # browsers keep the ß that Python makes "ss"
    ],
)
def test_url_review(url: str, host: str, openable: bool) -> None:
    review = review_url(url)
    assert (review.host, review.openable) == (host, openable)
    assert "\x1b" not in review.url


INVISIBLE_IN_HOSTS = [
    "\u180e",
    "\u2061",
    "\u2062",
    "\u2063",
    *map(chr, range(0x206A, 0x2070)),
    *map(chr, range(0x1D173, 0x1D17B)),
]


@pytest.mark.parametrize("invisible", INVISIBLE_IN_HOSTS, ids=lambda character: f"U+{ord(character):04X}")
def test_a_host_with_an_invisible_character_is_shown_escaped_and_not_opened(invisible: str) -> None:
    review = review_url(f"https://ex{invisible}ample.com/")
    assert review.host == "ex" + invisible.encode("ascii", "backslashreplace").decode("ascii") + "ample.com"
    assert not review.openable
    assert review.reason is not None
