"""Schema -> fields -> validated answers, for every schema feature elicitation allows (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from safedb.client.fields import Choice, Default, FieldKind, InvalidValue, StringFormat, check_value
from safedb.client.filling import FieldQuestion, fill_form
from safedb.client.model import InvalidAnswer, validate_content
from safedb.client.schema import UnsupportedSchema, parse_requested_schema
from safedb.client.text_input import Skipped, hint, numbered, parse_text, value_text
from tests.client.feature_server import EVERY_FEATURE_SCHEMA

pytestmark = pytest.mark.anyio

FORM = parse_requested_schema(EVERY_FEATURE_SCHEMA)
FIELDS = {field.name: field for field in FORM.fields}


def test_every_property_becomes_a_field_in_schema_order() -> None:
    assert [field.name for field in FORM.fields] == list(EVERY_FEATURE_SCHEMA["properties"])
    assert {name for name, field in FIELDS.items() if field.required} == set(EVERY_FEATURE_SCHEMA["required"])


def test_field_kinds_constraints_and_labels() -> None:
    name = FIELDS["name"]
    assert (name.kind, name.title, name.min_length, name.max_length) == (FieldKind.TEXT, "Full name", 2, 20)
    assert FIELDS["email"].string_format is StringFormat.EMAIL
    assert FIELDS["homepage"].string_format is StringFormat.URI
    assert FIELDS["birthday"].string_format is StringFormat.DATE
    assert FIELDS["meeting"].string_format is StringFormat.DATE_TIME
    age = FIELDS["age"]
    assert (age.kind, age.minimum, age.maximum, age.default) == (FieldKind.INTEGER, 0, 150, Default(30))
    assert (FIELDS["score"].kind, FIELDS["score"].maximum) == (FieldKind.NUMBER, 10)
    assert (FIELDS["subscribe"].kind, FIELDS["subscribe"].default) == (FieldKind.BOOLEAN, Default(True))
    assert FIELDS["color"].choices == (Choice("red", "red"), Choice("green", "green"), Choice("blue", "blue"))
    assert FIELDS["size"].choices == (Choice("s", "Small"), Choice("m", "Medium"), Choice("l", "Large"))
    assert FIELDS["plan"].choices == (Choice("free", "Free plan"), Choice("pro", "Pro plan"))
    toppings = FIELDS["toppings"]
    assert (toppings.kind, toppings.min_items, toppings.max_items) == (FieldKind.MULTI_CHOICE, 1, 2)
    assert FIELDS["days"].choices == (Choice("mon", "Monday"), Choice("tue", "Tuesday"))
    assert FIELDS["days"].default == Default(["mon"])


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("name", "Ada", "Ada"),
        ("email", "ada@example.com", "ada@example.com"),
        ("homepage", "https://example.com/x?y=1", "https://example.com/x?y=1"),
        ("birthday", "1815-12-10", "1815-12-10"),
        ("meeting", "2025-12-31T23:59:00Z", "2025-12-31T23:59:00Z"),
        ("meeting", "2025-12-31T23:59:00.5+01:00", "2025-12-31T23:59:00.5+01:00"),
        # A leap second (RFC 3339), 23:59:60 in UTC: Python's datetime cannot hold it, and it was refused.
        ("meeting", "2016-12-31T23:59:60Z", "2016-12-31T23:59:60Z"),
        ("meeting", "2017-01-01T00:59:60+01:00", "2017-01-01T00:59:60+01:00"),
        ("age", 0, 0),
        ("age", 150, 150),
        ("age", 42.0, 42),
        ("score", 9.5, 9.5),
        ("score", 10, 10),
        ("subscribe", False, False),
        ("color", "blue", "blue"),
        ("size", "m", "m"),
        ("plan", "pro", "pro"),
        ("toppings", ["ham", "olives"], ["ham", "olives"]),
        ("days", ["tue"], ["tue"]),
    ],
)
def test_valid_values_are_accepted(name: str, value: Any, expected: Any) -> None:
    assert check_value(FIELDS[name], value) == expected


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("name", "A", "at least 2 characters"),
        ("name", "x" * 21, "at most 20 characters"),
        ("name", 12, "valid string"),
        ("email", "not an email", "email address"),
        ("homepage", "example.com", "URI with a scheme"),
        ("email", "a@b.com\n", "email address"),  # `$` alone would let the line break through
        ("homepage", "https://example.com/\x00", "URI with a scheme"),
        ("birthday", "10/12/1815", "YYYY-MM-DD"),
        ("birthday", "2025-02-30", "YYYY-MM-DD"),
        ("meeting", "2025-12-31T23:59:00", "time zone"),
        ("meeting", "2016-12-31T12:00:60Z", "time zone"),  # a 60th second only ends a day (in UTC)
        ("age", -1, "greater than or equal to 0"),
        ("age", 151, "less than or equal to 150"),
        ("age", 4.5, "whole number"),
        ("age", True, "whole number"),
        ("score", "9", "must be a number"),
        ("score", 11, "less than or equal to 10"),
        ("score", float("nan"), "finite"),
        ("subscribe", "yes", "valid boolean"),
        ("color", "purple", "not one of the options"),
        ("size", "Small", "not one of the options"),
        ("plan", "Pro plan", "not one of the options"),
        ("toppings", [], "at least 1 item"),
        ("toppings", ["cheese", "ham", "olives"], "at most 2 items"),
        ("toppings", ["cheese", "pineapple"], "item 2: 'pineapple' is not one of the options"),
        ("toppings", "cheese", "valid list"),
    ],
)
def test_invalid_values_are_refused_with_a_reason(name: str, value: Any, reason: str) -> None:
    with pytest.raises(InvalidValue, match=reason):
        check_value(FIELDS[name], value)


@pytest.mark.parametrize(
    ("name", "typed", "value"),
    [
        ("subscribe", "y", True),
        ("subscribe", "No", False),
        ("age", "42", 42),
        ("score", "2.5", 2.5),
        ("color", "2", "green"),
        ("color", "Blue", "blue"),
        ("size", "Large", "l"),
        ("size", "med", "m"),
        ("size", "1", "s"),
        ("plan", "pro plan", "pro"),
        ("toppings", "1, olives", ["cheese", "olives"]),
        ("days", "Tuesday,mon", ["tue", "mon"]),
        ("name", "  Grace Hopper ", "  Grace Hopper "),
    ],
)
def test_typed_text_becomes_the_value(name: str, typed: str, value: Any) -> None:
    assert parse_text(FIELDS[name], typed) == value


DIGIT_CHOICES = {
    "type": "object",
    "properties": {
        "titled": {"type": "string", "oneOf": [{"const": "10", "title": "Ten"}, {"const": "2", "title": "Two"},
                                               {"const": "1", "title": "One"}]},
        "labels": {"type": "string", "enum": ["x", "y"], "enumNames": ["2", "1"]},
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "typed", "value", "options"),
    [("titled", "1", "1", "Ten, Two, One"), ("titled", "Ten", "10", "Ten, Two, One"), ("labels", "1", "y", "2, 1")],
)
def test_choices_that_are_numbers_are_not_numbered_and_typed_numbers_mean_them(
    name: str, typed: str, value: str, options: str
) -> None:
    field = {field.name: field for field in parse_requested_schema(DIGIT_CHOICES).fields}[name]
    assert not numbered(field)
    assert "numbers" not in hint(field)
    assert parse_text(field, typed) == value
    with pytest.raises(InvalidValue, match=re.escape(f"'3' is not one of the options ({options})")):
        parse_text(field, "3")  # no longer item 3 of the list


@pytest.mark.parametrize(
    ("options", "typed"),
    [
        (["5", "10", "20"], "1"),  # not numbered: "1" is the value or label 1, which no option is
        (["7 days", "30 days"], "7"),  # numbered: "7" is item 7, which does not exist
    ],
)
def test_a_typed_number_is_never_read_as_the_start_of_an_option(options: list[str], typed: str) -> None:
    field = parse_requested_schema({"type": "object", "properties": {"x": {"type": "string", "enum": options}}})
    with pytest.raises(InvalidValue, match="not one of the options"):
        parse_text(field.fields[0], typed)
    assert parse_text(field.fields[0], options[0]) == options[0]


def multi_select(options: list[str], **spec: Any) -> Any:
    schema = {"type": "array", "items": {"type": "string", "enum": options}, **spec}
    return parse_requested_schema({"type": "object", "properties": {"x": schema}, "required": ["x"]}).fields[0]


def test_a_dash_chooses_nothing_when_the_schema_allows_it() -> None:
    field = multi_select(["a", "b"])
    assert parse_text(field, " - ") == []
    assert value_text(field, []) == "-"  # an empty selection kept when the form is edited
    assert "- for none" in hint(field)
    at_least_one = multi_select(["a", "b"], minItems=1)
    assert "for none" not in hint(at_least_one)
    with pytest.raises(InvalidValue, match="at least 1 item"):
        parse_text(at_least_one, "-")
    assert parse_text(multi_select(["-", "a"]), "-") == ["-"]  # an option spelled "-" is still chosen by it


def test_when_an_option_is_called_a_dash_none_is_typed_as_empty_quotes() -> None:
    """An empty selection was pre-filled as `-`, which read back as the option `-` (say, ALL_USERS titled `-`)."""
    field = multi_select(["-", "a"])
    assert value_text(field, []) == '""'
    assert parse_text(field, value_text(field, [])) == []
    assert '"" for none' in hint(field)


def test_choices_with_commas_are_typed_and_prefilled_in_quotes() -> None:
    field = multi_select(["Smith, John", "Doe", 'Say "hi"', '"Quoted"'])
    chosen = ["Smith, John", "Doe", '"Quoted"']
    assert value_text(field, chosen) == '"Smith, John", Doe, """Quoted"""'
    assert parse_text(field, value_text(field, chosen)) == chosen
    assert parse_text(field, 'Say "hi", "Smith, John"') == ['Say "hi"', "Smith, John"]
    assert "double quotes" in hint(field)
    with pytest.raises(InvalidValue, match="double quotes"):
        parse_text(field, '"Smith, John')


def test_empty_text_skips_an_optional_field_and_refuses_a_required_one() -> None:
    assert parse_text(FIELDS["score"], "") == Skipped()
    with pytest.raises(InvalidValue, match="required"):
        parse_text(FIELDS["name"], "   ")


@pytest.mark.parametrize(
    ("name", "typed"),
    [
        ("subscribe", "maybe"),
        ("age", "forty"),
        ("color", "4"),
        ("size", "x"),
        ("color", "²"),  # a digit to str.isdigit, not to int()
        ("age", "9" * 5000),  # more digits than Python converts
    ],
)
def test_unreadable_text_is_refused(name: str, typed: str) -> None:
    with pytest.raises(InvalidValue):
        parse_text(FIELDS[name], typed)


def test_whole_answer_validation_keeps_exactly_the_given_fields() -> None:
    answer = {"name": "Ada", "email": "ada@example.com", "age": 36, "color": "red", "toppings": ["ham"]}
    assert validate_content(FORM, answer) == answer  # no defaults added, nothing sent as null


def test_whole_answer_validation_names_every_problem() -> None:
    with pytest.raises(InvalidAnswer) as caught:
        validate_content(FORM, {"name": "A", "email": "ada@example.com", "color": "red", "extra": 1, "score": None})
    assert set(caught.value.problems) == {"name", "age", "toppings", "extra", "score"}
    assert caught.value.problems["age"] == "is required"
    assert caught.value.problems["extra"] == "is not a field of this form"
    assert "null" in caught.value.problems["score"]


class ScriptedReader:
    """Types the given lines in order and keeps every question it was shown."""

    def __init__(self, lines: list[str]) -> None:
        self._lines: Iterator[str] = iter(lines)
        self.questions: list[FieldQuestion] = []

    async def read(self, question: FieldQuestion) -> str:
        self.questions.append(question)
        return next(self._lines)


async def test_filling_the_whole_form_reasks_invalid_answers_with_the_reason() -> None:
    reader = ScriptedReader(
        [
            "A", "Ada Lovelace",  # name: too short, then fine
            "ada-at-example", "ada@example.com",  # email
            "",  # homepage: optional, left out
            "1815-12-10",  # birthday
            "",  # meeting: left out
            "200", "36",  # age: pre-filled 30, out of range, then fine
            "",  # score: left out
            "no",  # subscribe
            "purple", "3",  # color
            "Medium",  # size
            "2",  # plan
            "", "cheese,ham,olives", "cheese, olives",  # toppings: required, too many, fine
            "Monday, Tuesday",  # days
            "Augusta",  # first-name
        ]
    )  # fmt: skip
    content = await fill_form(FORM, reader)
    assert content == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "birthday": "1815-12-10",
        "age": 36,
        "subscribe": False,
        "color": "blue",
        "size": "m",
        "plan": "pro",
        "toppings": ["cheese", "olives"],
        "days": ["mon", "tue"],
        "first-name": "Augusta",
    }
    problems = [(q.field.name, q.problem) for q in reader.questions if q.problem is not None]
    assert [name for name, _ in problems] == ["name", "email", "age", "color", "toppings", "toppings"]
    assert "at least 2 characters" in problems[0][1]  # type: ignore[operator]
    assert "email address" in problems[1][1]  # type: ignore[operator]
    assert "less than or equal to 150" in problems[2][1]  # type: ignore[operator]
    assert "required" in problems[4][1]  # type: ignore[operator]
    assert "at most 2 items" in problems[5][1]  # type: ignore[operator]
    prefilled = {q.field.name: q.prefilled for q in reader.questions if q.problem is None}
    assert prefilled["age"] == "30"
    assert prefilled["subscribe"] == "yes"
    assert prefilled["plan"] == "free"
    assert prefilled["days"] == "mon"
    assert prefilled["name"] == ""


async def test_accepting_the_prefilled_defaults_sends_them() -> None:
    form = parse_requested_schema(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": True},
            },
        }
    )
    reader = ScriptedReader([q for q in ("John Doe", "30", "95.5", "active", "yes")])
    assert await fill_form(form, reader) == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


def test_a_default_that_does_not_fit_is_dropped() -> None:
    form = parse_requested_schema(
        {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3, "default": 9}}}
    )
    assert form.fields[0].default is None


def test_secret_looking_fields_are_flagged() -> None:
    form = parse_requested_schema(
        {
            "type": "object",
            "properties": {
                "api_key": {"type": "string"},
                "pw": {"type": "string", "title": "Password"},
                "gh": {"type": "string", "description": "Your GitHub access token"},
                "notes": {"type": "string"},
                "passport_country": {"type": "string", "title": "Country"},
                "newPassword": {"type": "string"},
            },
        }
    )
    assert [field.name for field in form.secret_fields] == ["api_key", "pw", "gh", "newPassword"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array"},
        {"type": "object", "properties": {"nested": {"type": "object", "properties": {}}}},
        {"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}}},
        {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "properties": {"x": {"type": "string", "enum": ["a"], "enumNames": ["A", "B"]}}},
        {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]},
        {"type": "object", "properties": {"x": {"type": "string", "oneOf": [{"title": "no const"}]}}},
    ],
)
def test_schemas_outside_the_elicitation_subset_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchema):
        parse_requested_schema(schema)
