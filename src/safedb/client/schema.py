"""An elicitation's requested schema, read into form fields (pure: no terminal, no protocol).

MCP restricts `requestedSchema` to a flat object whose properties are primitives: strings (with
`format` email, uri, date or date-time and min/maxLength), numbers and integers (minimum/maximum),
booleans, single-select enums (`enum`, titled `oneOf` with const/title, or legacy `enumNames`), and
multi-select arrays (`items.enum` or `items.anyOf`, minItems/maxItems). The client also checks the
JSON Schema keywords that fit those fields (`pattern`, exclusive bounds, `multipleOf`, `enum` and
`const` on any primitive, `uniqueItems`). Anything else is refused with `UnsupportedSchema`, also a
keyword the client does not check (see `schema_keywords`), so a client never sends an answer it
could not check.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import regex

from safedb.client import schema_keywords
from safedb.client.fields import (
    Choice,
    Default,
    ElicitationForm,
    FieldKind,
    FormField,
    InvalidValue,
    StringFormat,
    check_value,
    compile_pattern,
)

logger = logging.getLogger(__name__)

_OPTION_LISTS = ("enum", "oneOf", "anyOf")


class UnsupportedSchema(ValueError):
    """The requested schema is not a flat object of the primitives MCP elicitation allows."""


def parse_requested_schema(schema: Mapping[str, Any]) -> ElicitationForm:
    """Read a requested schema into form fields, in the order the schema lists its properties.

    Raises:
        UnsupportedSchema: the schema is not an object of supported primitive properties.
    """
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema("the requested schema is not a JSON object")
    if schema.get("type", "object") != "object":
        raise UnsupportedSchema(f"the requested schema has type {schema.get('type')!r}; forms need 'object'")
    _refuse_unchecked(schema, schema_keywords.FORM, "the requested schema")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise UnsupportedSchema("'properties' is not an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise UnsupportedSchema("'required' is not a list of property names")
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise UnsupportedSchema(f"'required' names properties that are not defined: {', '.join(unknown)}")
    fields = tuple(_parse_field(name, spec, name in required) for name, spec in properties.items())
    return ElicitationForm(fields, _optional_str(schema, "title"), _optional_str(schema, "description"))


def _parse_field(name: str, spec: Any, required: bool) -> FormField:
    if not isinstance(spec, Mapping):
        raise UnsupportedSchema(f"property {name!r} is not a schema object")
    spec = _without_null(name, spec)
    kind_name = spec.get("type")
    common: dict[str, Any] = {
        "name": name,
        "required": required,
        "title": _optional_str(spec, "title"),
        "description": _optional_str(spec, "description"),
    }
    if kind_name == "string":
        field = _string_field(name, spec, common)
    elif kind_name in ("number", "integer"):
        _refuse_unchecked(spec, schema_keywords.NUMBER, f"property {name!r}")
        field = FormField(
            kind=FieldKind.INTEGER if kind_name == "integer" else FieldKind.NUMBER,
            minimum=_optional_number(spec, "minimum", name),
            maximum=_optional_number(spec, "maximum", name),
            exclusive_minimum=_optional_number(spec, "exclusiveMinimum", name),
            exclusive_maximum=_optional_number(spec, "exclusiveMaximum", name),
            multiple_of=_optional_step(spec, name),
            **common,
        )
        field = _with_allowed(field, spec)
    elif kind_name == "boolean":
        _refuse_unchecked(spec, schema_keywords.BOOLEAN, f"property {name!r}")
        field = _with_allowed(FormField(kind=FieldKind.BOOLEAN, **common), spec)
    elif kind_name == "array":
        field = _multi_choice_field(name, spec, common)
    else:
        raise UnsupportedSchema(f"property {name!r} has type {kind_name!r}, which elicitation forms do not support")
    if "default" in spec:
        field = _with_default(field, spec["default"])
    return field


# What describes a field rather than limits its values: given outside a nullable `anyOf`, it describes the field.
_ANNOTATIONS = frozenset({"title", "description", "default"})


def _without_null(name: str, spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The property with null taken out of the types it allows.

    Pydantic writes an optional field `x: str | None = None` as `{"anyOf": [{"type": "string"}, {"type":
    "null"}], "default": null}` (or `"type": ["string", "null"]`), and servers built on it, such as the Python
    SDK 1.x, send that as it is. The client never sends null (it leaves an optional field out instead), so such
    a property is asked as the other type; every answer to that is an answer to the property.
    """
    options = [keyword for keyword in ("anyOf", "oneOf") if keyword in spec]
    if isinstance(spec.get("type"), list) and "null" in spec["type"]:
        types = [kind for kind in spec["type"] if kind != "null"]
        spec = {**spec, "type": types[0] if len(types) == 1 else types}
    elif options in (["anyOf"], ["oneOf"]):
        branches = spec[options[0]]
        others = [branch for branch in branches if branch != {"type": "null"}] if isinstance(branches, list) else []
        if len(others) != 1 or len(others) == len(branches) or not isinstance(others[0], Mapping):
            return spec
        outer = {keyword: value for keyword, value in spec.items() if keyword != options[0]}
        # Both a limit inside the branch and one outside it must hold; one could not simply replace the other.
        if twice := sorted(k for k in outer if k in others[0] and k not in _ANNOTATIONS and outer[k] != others[0][k]):
            raise UnsupportedSchema(
                f"property {name!r} limits its values both inside and outside {options[0]} ({', '.join(twice)})"
            )
        spec = {**others[0], **outer}  # the outer title, description and default describe the field
    else:
        return spec
    if "default" in spec and spec["default"] is None:  # "no default", not a default the client could send
        spec = {keyword: value for keyword, value in spec.items() if keyword != "default"}
    return spec


def _string_field(name: str, spec: Mapping[str, Any], common: dict[str, Any]) -> FormField:
    if any(keyword in spec for keyword in (*_OPTION_LISTS, "const")):
        _refuse_unchecked(spec, schema_keywords.SINGLE_CHOICE, f"property {name!r}")
        return FormField(kind=FieldKind.CHOICE, choices=_single_choices(name, spec), **common)
    _refuse_unchecked(spec, schema_keywords.TEXT, f"property {name!r}")
    raw_format = spec.get("format")
    try:
        string_format = StringFormat(raw_format) if raw_format is not None else None
    except ValueError:
        raise UnsupportedSchema(f"property {name!r} has format {raw_format!r}, which forms do not support") from None
    return FormField(
        kind=FieldKind.TEXT,
        string_format=string_format,
        min_length=_optional_count(spec, "minLength", name),
        max_length=_optional_count(spec, "maxLength", name),
        pattern=_optional_pattern(spec, name),
        **common,
    )


def _single_choices(name: str, spec: Mapping[str, Any]) -> tuple[Choice, ...]:
    given = [keyword for keyword in _OPTION_LISTS if keyword in spec]
    if len(given) > 1:
        raise UnsupportedSchema(f"property {name!r} lists its options twice ({' and '.join(given)})")
    if given == ["enum"]:
        values = _string_list(spec["enum"], name, "enum")
        names = spec.get("enumNames")
        labels = _string_list(names, name, "enumNames") if names is not None else values
        if len(labels) != len(values):
            raise UnsupportedSchema(f"property {name!r}: enumNames and enum differ in length")
        choices = tuple(Choice(v, label) for v, label in zip(values, labels, strict=True))
    elif given:
        choices = _titled_choices(name, spec[given[0]])
    else:
        choices = ()
    if "const" not in spec:
        return choices
    const = spec["const"]
    if not isinstance(const, str):
        raise UnsupportedSchema(f"property {name!r}: const is not a string")
    choices = tuple(choice for choice in choices if choice.value == const) if given else (Choice(const, const),)
    if not choices:
        raise UnsupportedSchema(f"property {name!r}: const {const!r} is not one of its options")
    return choices


def _multi_choice_field(name: str, spec: Mapping[str, Any], common: dict[str, Any]) -> FormField:
    _refuse_unchecked(spec, schema_keywords.MULTI_CHOICE, f"property {name!r}")
    items = spec.get("items")
    if not isinstance(items, Mapping):
        raise UnsupportedSchema(f"property {name!r} is an array without an 'items' schema")
    _refuse_unchecked(items, schema_keywords.CHOICE_ITEMS, f"the items of property {name!r}")
    given = [keyword for keyword in _OPTION_LISTS if keyword in items]
    if items.get("type", "string") != "string" or len(given) != 1:
        raise UnsupportedSchema(f"property {name!r} is an array that is not a multi-select enum")
    if given == ["enum"]:
        choices = tuple(Choice(value, value) for value in _string_list(items["enum"], name, "items.enum"))
    else:
        choices = _titled_choices(name, items[given[0]])
    unique_items = spec.get("uniqueItems", False)
    if not isinstance(unique_items, bool):
        raise UnsupportedSchema(f"property {name!r}: uniqueItems is not true or false")
    return FormField(
        kind=FieldKind.MULTI_CHOICE,
        choices=choices,
        min_items=_optional_count(spec, "minItems", name),
        max_items=_optional_count(spec, "maxItems", name),
        unique_items=unique_items,
        **common,
    )


def _titled_choices(name: str, options: Any) -> tuple[Choice, ...]:
    if not isinstance(options, list) or not options:
        raise UnsupportedSchema(f"property {name!r}: oneOf/anyOf must be a non-empty list of {{const, title}}")
    choices = []
    for option in options:
        if not isinstance(option, Mapping) or not isinstance(option.get("const"), str):
            raise UnsupportedSchema(f"property {name!r}: every option needs a string 'const'")
        _refuse_unchecked(option, schema_keywords.TITLED_OPTION, f"an option of property {name!r}")
        title = option.get("title")
        choices.append(Choice(option["const"], title if isinstance(title, str) else option["const"]))
    values = [choice.value for choice in choices]
    if twice := sorted({value for value in values if values.count(value) > 1}):
        # Under oneOf a value two options give matches both, so no answer would be valid; under anyOf the person
        # could not tell which of the titles they chose.
        raise UnsupportedSchema(f"property {name!r} gives the value {twice[0]!r} to more than one option")
    return tuple(choices)


def _with_default(field: FormField, value: Any) -> FormField:
    """Keep a default only when it fits the field; a server's bad default is dropped, never sent."""
    try:
        checked = check_value(field, value)
    except InvalidValue as exc:
        logger.warning("Ignoring default %r of field %r: %s", value, field.name, exc)
        return field
    return replace(field, default=Default(checked))


def _with_allowed(field: FormField, spec: Mapping[str, Any]) -> FormField:
    """The field limited to its `enum` and `const` values; members that cannot be answers are dropped."""
    if "enum" not in spec and "const" not in spec:
        return field
    candidates = spec.get("enum", [spec.get("const")])
    if not isinstance(candidates, list) or not candidates:
        raise UnsupportedSchema(f"property {field.name!r}: enum must be a non-empty list")
    if "const" in spec:
        candidates = [value for value in candidates if _same_json(value, spec["const"])]
    allowed = []
    for value in candidates:
        try:
            allowed.append(check_value(field, value))
        except InvalidValue:
            continue  # of another type or out of range: no answer can be it
    if not allowed:
        raise UnsupportedSchema(f"property {field.name!r}: no value of its type fits its enum/const")
    return replace(field, allowed=tuple(dict.fromkeys(allowed)))


def _same_json(left: Any, right: Any) -> bool:
    """JSON equality for scalars: 1 equals 1.0, but true is not 1."""
    return isinstance(left, bool) == isinstance(right, bool) and left == right


def _refuse_unchecked(spec: Mapping[str, Any], checked: frozenset[str], where: str) -> None:
    unchecked = schema_keywords.unchecked_keywords(spec, checked)
    if unchecked:
        listed = ", ".join(repr(keyword) for keyword in unchecked)
        raise UnsupportedSchema(f"{where} uses {listed}, which this client cannot check")


def _optional_pattern(spec: Mapping[str, Any], name: str) -> str | None:
    pattern = spec.get("pattern")
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise UnsupportedSchema(f"property {name!r}: pattern is not a string")
    try:
        compile_pattern(pattern)
    except (re.error, regex.error, RecursionError, OverflowError) as exc:
        raise UnsupportedSchema(f"property {name!r}: pattern {pattern!r} cannot be checked here ({exc})") from None
    return pattern


def _optional_step(spec: Mapping[str, Any], name: str) -> float | None:
    step = _optional_number(spec, "multipleOf", name)
    if step is not None and not (math.isfinite(step) and step > 0):
        raise UnsupportedSchema(f"property {name!r}: multipleOf is not a positive number")
    return step


def _optional_str(spec: Mapping[str, Any], key: str) -> str | None:
    value = spec.get(key)
    return value if isinstance(value, str) else None


def _optional_number(spec: Mapping[str, Any], key: str, name: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedSchema(f"property {name!r}: {key} is not a number")
    if not abs(value) <= sys.float_info.max:  # also NaN; JSON's 1e400 arrives as infinity
        raise UnsupportedSchema(f"property {name!r}: {key} is beyond the numbers this client can check")
    return value


def _optional_count(spec: Mapping[str, Any], key: str, name: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedSchema(f"property {name!r}: {key} is not a non-negative integer")
    return min(value, sys.maxsize)  # no string or list is longer: the same limit, in a size pydantic can hold


def _string_list(values: Any, name: str, key: str) -> tuple[str, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise UnsupportedSchema(f"property {name!r}: {key} must be a non-empty list of strings")
    if not all(isinstance(value, str) for value in values):
        raise UnsupportedSchema(f"property {name!r}: {key} must list strings only")
    return tuple(values)
