"""`schema_to_model`: a pydantic model that validates exactly like the requested schema and keeps its names."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from safedb.client import dump_content, schema_to_model
from tests.client.feature_server import EVERY_FEATURE_SCHEMA

VALID = {"name": "Ada", "email": "ada@example.com", "age": 36, "color": "red", "toppings": ["ham"]}


def test_original_names_are_kept_even_when_they_are_not_identifiers() -> None:
    model = schema_to_model(
        {
            "type": "object",
            "properties": {
                "first-name": {"type": "string"},
                "class": {"type": "string"},
                "model_config": {"type": "string"},
                "json": {"type": "boolean"},
                "ok": {"type": "boolean"},
            },
            "required": ["first-name", "class"],
        }
    )
    answer = model.model_validate({"first-name": "Ada", "class": "A", "model_config": "x", "json": True, "ok": False})
    assert dump_content(answer) == {"first-name": "Ada", "class": "A", "model_config": "x", "json": True, "ok": False}
    assert [field.alias for field in model.model_fields.values()] == [
        "first-name",
        "class",
        "model_config",
        "json",
        "ok",
    ]
    assert all(name.isidentifier() for name in model.model_fields)
    assert model(**{"first-name": "Grace", "class": "B"}).model_dump(by_alias=True, exclude_none=True) == {
        "first-name": "Grace",
        "class": "B",
    }
    with pytest.raises(ValidationError):
        model.model_validate({"first_name": "Ada", "class": "A"})  # only the schema's own names count


def test_required_optional_and_defaults() -> None:
    model = schema_to_model(EVERY_FEATURE_SCHEMA)
    answer = model.model_validate(VALID)
    assert dump_content(answer) == {**VALID, "subscribe": True, "plan": "free", "days": ["mon"]}
    for missing in ("name", "email", "age", "color", "toppings"):
        with pytest.raises(ValidationError, match=missing):
            model.model_validate({key: value for key, value in VALID.items() if key != missing})
    with pytest.raises(ValidationError, match="null"):
        model.model_validate({**VALID, "score": None})  # optional means "may be left out", never null
    with pytest.raises(ValidationError, match="Extra inputs"):
        model.model_validate({**VALID, "nickname": "A"})


def test_typed_instances_carry_python_values() -> None:
    model = schema_to_model(EVERY_FEATURE_SCHEMA)
    answer: Any = model.model_validate({**VALID, "age": 40.0, "score": 7})
    assert (answer.age, answer.score, answer.subscribe, answer.homepage) == (40, 7, True, None)
    assert isinstance(answer, BaseModel)


_NO_FORMATS = copy.deepcopy(EVERY_FEATURE_SCHEMA)
for _spec in _NO_FORMATS["properties"].values():
    _spec.pop("format", None)
_NO_FORMATS_STRICT = {**_NO_FORMATS, "additionalProperties": False}
_MODEL = schema_to_model(_NO_FORMATS)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.floats(-5, 200, allow_nan=False),
    st.text(max_size=25),
    st.sampled_from(["red", "green", "blue", "s", "m", "free", "pro", "cheese", "ham", "olives", "mon", "tue"]),
    st.lists(st.sampled_from(["cheese", "ham", "olives", "mon", "tue", "x"]), max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*EVERY_FEATURE_SCHEMA["properties"], "extra"]),
        _VALUES,
        max_size=len(_NO_FORMATS["properties"]),
    ).map(lambda drawn: {**VALID, **drawn})
)
def test_model_accepts_exactly_what_json_schema_accepts(content: dict[str, Any]) -> None:
    schema_says = jsonschema.Draft202012Validator(_NO_FORMATS_STRICT).is_valid(content)
    try:
        _MODEL.model_validate(content)
        model_says = True
    except ValidationError:
        model_says = False
    assert model_says == schema_says, content


_CONSTRAINED = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "code": {"type": "string", "pattern": "^[a-c]{2,3}$"},
        "price": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10, "multipleOf": 0.5},
        "agree": {"type": "boolean", "const": True},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "uniqueItems": True},
    },
    "additionalProperties": False,
}
_CONSTRAINED_MODEL = schema_to_model(_CONSTRAINED)
_CONSTRAINED_VALUES = st.one_of(
    st.booleans(),
    st.integers(-2, 12),
    st.integers(-4, 24).map(lambda halves: halves / 2),
    st.floats(-1, 11, allow_nan=False),
    st.text(alphabet="abcd", max_size=4),  # no line breaks: there the client is stricter than Python's re
    st.lists(st.sampled_from(["a", "b", "c", "x"]), max_size=4),
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(list(_CONSTRAINED["properties"])), _CONSTRAINED_VALUES))
def test_model_checks_patterns_enums_bounds_and_steps_as_json_schema_does(content: dict[str, Any]) -> None:
    schema_says = jsonschema.Draft202012Validator(_CONSTRAINED).is_valid(content)
    try:
        _CONSTRAINED_MODEL.model_validate(content)
        model_says = True
    except ValidationError:
        model_says = False
    assert model_says == schema_says, content
