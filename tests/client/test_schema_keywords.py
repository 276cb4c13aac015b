"""JSON Schema keywords beyond the elicitation basics: checked when the client can, the schema refused when not."""

from __future__ import annotations

from typing import Any

import pytest

from safedb.client.fields import InvalidValue, check_value
from safedb.client.schema import UnsupportedSchema, parse_requested_schema

CONSTRAINED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "ratio": {"type": "number", "enum": [0.5, 1]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "code": {"type": "string", "pattern": "[A-Z]{2}"},
        "price": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
        "step": {"type": "number", "multipleOf": 0.1},
        "dozen": {"type": "integer", "multipleOf": 12},
        "agree": {"type": "boolean", "const": True},
        "answer": {"type": "integer", "const": 42},
        "word": {"type": "string", "const": "yes"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "uniqueItems": True},
    },
}
FIELDS = {field.name: field for field in parse_requested_schema(CONSTRAINED).fields}


@pytest.mark.parametrize(
    ("name", "allowed", "forbidden", "reason"),
    [
        ("level", 2, 7, "must be one of 1, 2, 3"),
        ("level", 3.0, 4.0, "must be one of 1, 2, 3"),  # 3.0 is the integer 3
        ("ratio", 1.0, 0.7, "must be one of 0.5, 1"),
        ("zip", "12345", "abc", "must match the pattern"),
        ("zip", "12345", "1234", "must match the pattern"),
        ("zip", "12345", "١٢٣٤٥", "must match the pattern"),  # digits to Python's \d, not to ECMA-262's
        ("zip", "12345", "12345\n", "must be one line"),  # Python's `$` matches before a final line break
        ("code", "xxAByy", "ab", "must match the pattern"),  # a pattern is searched for, not anchored
        ("price", 0.01, 0, "greater than 0"),
        ("price", 99.9, 100, "less than 100"),
        ("step", 0.3, 0.35, "multiple of 0.1"),  # 0.3 is a multiple as written, though not in binary floats
        ("dozen", 36, 30, "multiple of 12"),
        ("agree", True, False, "must be true"),
        ("answer", 42, 41, "must be 42"),
        ("word", "yes", "no", "not one of the options"),
        ("tags", ["b", "a"], ["a", "a"], "must not choose an option twice"),
    ],
)
def test_a_checked_keyword_lets_through_what_it_allows_and_only_that(
    name: str, allowed: Any, forbidden: Any, reason: str
) -> None:
    assert check_value(FIELDS[name], allowed) == allowed
    with pytest.raises(InvalidValue, match=reason):
        check_value(FIELDS[name], forbidden)


def test_annotations_are_ignored_and_the_constraints_beside_them_checked() -> None:
    form = parse_requested_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": False,
            "$comment": "made by hand",
            "properties": {
                "zip": {
                    "type": "string",
                    "pattern": "^[0-9]{5}$",
                    "title": "ZIP code",
                    "description": "Five digits",
                    "examples": ["12345"],
                    "default": "10115",
                    "deprecated": False,
                    "readOnly": False,
                    "writeOnly": False,
                    "$comment": "US style",
                    "x-display-order": 1,
                }
            },
        }
    )
    (field,) = form.fields
    assert (field.title, field.default.value if field.default else None) == ("ZIP code", "10115")
    with pytest.raises(InvalidValue, match="pattern"):
        check_value(field, "1011")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"type": "string", "not": {"const": "x"}}, "uses 'not'"),
        ({"type": "string", "allOf": [{"minLength": 2}]}, "uses 'allOf'"),
        ({"type": "string", "contentMediaType": "application/json"}, "uses 'contentMediaType'"),
        ({"type": "string", "enum": ["a", "bb"], "minLength": 2}, "uses 'minLength'"),
        ({"type": "integer", "format": "int32"}, "uses 'format'"),
        ({"type": "boolean", "if": {"const": True}, "then": {}}, "uses 'if', 'then'"),
        ({"type": "array", "items": {"type": "string", "enum": ["a"]}, "contains": {"const": "a"}}, "uses 'contains'"),
        ({"type": "array", "items": {"type": "string", "enum": ["a", "b"], "pattern": "a"}}, "uses 'pattern'"),
        ({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A", "pattern": "b"}]}}, "uses 'pattern'"),
        ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, "exclusiveMinimum is not a number"),
        ({"type": "number", "multipleOf": 0}, "multipleOf is not a positive number"),
        ({"type": "string", "pattern": r"^\p{L}+$"}, "cannot be checked here"),  # ECMA-262 only
        ({"type": "string", "pattern": "^(?<year>[0-9]{4})$"}, "cannot be checked here"),  # ECMA-262 spelling
        ({"type": "string", "pattern": "("}, "cannot be checked here"),
        ({"type": "string", "enum": ["a"], "oneOf": [{"const": "b"}]}, "lists its options twice"),
        (
            {"type": "string", "oneOf": [{"const": "a", "title": "Safe"}, {"const": "a", "title": "Danger"}]},
            "gives the value 'a' to more than one option",
        ),
        ({"type": "string", "enum": ["a", "b"], "const": "c"}, "'c' is not one of its options"),
        ({"type": "integer", "enum": ["one", 1.5]}, "no value of its type fits"),
        ({"type": "integer", "minimum": 5, "const": 4}, "no value of its type fits"),
        # Both limits hold: the one outside a nullable anyOf took the place of the one inside, and 50 was sent.
        (
            {"anyOf": [{"type": "integer", "maximum": 5}, {"type": "null"}], "maximum": 100},
            "both inside and outside anyOf \\(maximum\\)",
        ),
        (
            {"oneOf": [{"type": "string", "enum": ["dry-run"]}, {"type": "null"}], "enum": ["dry-run", "production"]},
            "both inside and outside oneOf \\(enum\\)",
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 3, "pattern": "a"}, {"type": "null"}], "maxLength": 9},
            "both inside and outside anyOf \\(maxLength\\)",
        ),
    ],
)
def test_fields_with_keywords_the_client_cannot_check_are_refused(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(UnsupportedSchema, match=problem):
        parse_requested_schema({"type": "object", "properties": {"x": spec}})


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"minProperties": 1}, "uses 'minProperties'"),
        ({"dependentRequired": {"x": ["y"]}}, "uses 'dependentRequired'"),
        ({"patternProperties": {"^x$": {"minLength": 3}}}, "uses 'patternProperties'"),
        ({"propertyNames": {"maxLength": 0}}, "uses 'propertyNames'"),
    ],
)
def test_schemas_with_keywords_the_client_cannot_check_are_refused(extra: dict[str, Any], problem: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}, **extra}
    with pytest.raises(UnsupportedSchema, match=f"the requested schema {problem}"):
        parse_requested_schema(schema)


def test_a_nullable_field_keeps_its_limits_and_takes_its_description_from_outside() -> None:
    spec = {"anyOf": [{"type": "integer", "maximum": 5}, {"type": "null"}], "maximum": 5, "title": "Replicas"}
    (field,) = parse_requested_schema({"type": "object", "properties": {"n": spec}}).fields
    assert (field.title, field.maximum) == ("Replicas", 5)
    with pytest.raises(InvalidValue, match="less than or equal to 5"):
        check_value(field, 50)


def test_an_integer_in_another_form_is_taken_only_while_a_float_holds_it_exactly() -> None:
    """1e23 was sent as 99999999999999991611392, the float's own digits."""
    (field,) = parse_requested_schema({"type": "object", "properties": {"n": {"type": "integer"}}}).fields
    assert check_value(field, 3.0) == 3
    assert check_value(field, 2.0**53) == 2**53
    assert check_value(field, 10**23) == 10**23  # written in digits: exact
    with pytest.raises(InvalidValue, match="written in digits"):
        check_value(field, 1e23)
