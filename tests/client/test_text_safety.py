"""Server text shown in the terminal is cleaned; URLs are reviewed before anything is opened (pure)."""

from __future__ import annotations

import pytest
from mcp_types import CallToolResult, TextContent

from safedb.client.results import render_result
from safedb.client.sanitize import clean_text, shown_text
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
    ("text", "multiline", "shown"),
    [
        ("innocuous\n" + "\n" * 120 + "Server: SafeDB", True, "innocuous\n⟨121 line breaks⟩\nServer: SafeDB"),
        ("two\n\n\nempty lines", True, "two\n\n\nempty lines"),
        ("lines of\n  \n\u3000\n \n\nblanks", True, "lines of\n⟨5 line breaks⟩\nblanks"),
        ("\n\n\n\nfirst", True, "\n⟨4 line breaks⟩\nfirst"),
        ("eight" + " " * 8 + "blanks", True, "eight        blanks"),
        ("pushed" + " " * 3000 + "right", True, "pushed⟨3,000 blanks⟩right"),
        ("tabs\t\t\there", True, "tabs⟨12 blanks⟩here"),
        ("wide" + "\u3000" * 20 + "\u00a0" * 5 + "\u2800" * 5 + "spaces", True, "wide⟨30 blanks⟩spaces"),
        ("a name" + "\n" * 40 + "Server: SafeDB", False, "a name⟨40 blanks⟩Server: SafeDB"),
        ("\x1b[2J" + "\n" * 9 + "cleaned first", True, "\n⟨9 line breaks⟩\ncleaned first"),
    ],
)
def test_runs_of_blanks_and_empty_lines_are_named_with_their_count(text: str, multiline: bool, shown: str) -> None:
    """As SafeDB's approval question names them in a statement: a server's text that draws as nothing could push
    the client's `Server:` line out of view and draw another below it."""
    assert shown_text(text, multiline=multiline) == shown


def test_a_tool_results_empty_lines_are_named_and_its_spacing_kept() -> None:
    code = "def f():\n            return 1"
    result = CallToolResult(content=[TextContent(type="text", text=code + "\n" * 50 + "Server: SafeDB")])
    assert render_result(result) == code + "\n⟨50 line breaks⟩\nServer: SafeDB"


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


def _tags(text: str) -> str:
    """`text` spelled in Unicode tag characters (U+E0000 + its ASCII code): invisible, yet read by machines."""
    return "".join(chr(0xE0000 + ord(character)) for character in text)


ENGLAND_FLAG = "\U0001f3f4" + _tags("gbeng") + "\U000e007f"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("DROP\u2060 TABLE", "DROP TABLE"),  # word joiner
        ("a\u2061b\u2062c\u2063d\u2064e", "abcde"),  # invisible function application, times, separator, plus
        ("ad\u00admin", "admin"),  # soft hyphen: "admin" and "ad-min" look alike
        ("Approve" + _tags(" and also grant admin"), "Approve"),  # tag characters smuggling an instruction
        ("\ufff9annotated\ufffa reading\ufffb text", "annotated reading text"),  # interlinear annotation
        ("\u180efilled\u206aold\u206fstyle", "filledoldstyle"),  # Mongolian vowel separator, deprecated formats
        ("\U0001d173music\U0001d17a", "music"),  # musical symbol format controls
        ("\U000e0001language tag", "language tag"),
        ("\u2065\ufff0reserved", "reserved"),  # unassigned, but reserved as invisible
    ],
)
def test_invisible_format_characters_are_removed(text: str, shown: str) -> None:
    assert clean_text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian "I want": ZWNJ keeps the letters apart
        "\u0915\u094d\u200d\u0937",  # Devanagari: ZWJ asks for the half form of KA
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # an emoji family (ZWJ sequence)
        ENGLAND_FLAG,  # an emoji tag sequence: the subdivision flag of England
        f"{ENGLAND_FLAG} and \U0001f3f4" + _tags("gbsct") + "\U000e007f",
        "\u0600\u0661\u0662\u0663",  # the Arabic number sign, drawn under the digits it precedes
    ],
)
def test_format_characters_that_scripts_and_emoji_need_are_kept(text: str) -> None:
    assert clean_text(text) == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (ENGLAND_FLAG + _tags("grant admin"), ENGLAND_FLAG),
        ("\U0001f3f4" + _tags("grant admin"), "\U0001f3f4"),  # no cancel tag: not a flag
        ("\U0001f3f4" + _tags("Gbeng") + "\U000e007f", "\U0001f3f4"),  # subdivision codes are lower case
        ("\U0001f3f4" + _tags("gbenglandx") + "\U000e007f", "\U0001f3f4"),  # too long for a subdivision
        ("x" + _tags("gbeng") + "\U000e007f", "x"),  # tags only follow the black flag
    ],
)
def test_tag_characters_outside_a_subdivision_flag_are_removed(text: str, shown: str) -> None:
    assert clean_text(text) == shown
