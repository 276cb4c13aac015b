"""An elicitation's requested schema, read into form fields (pure: no terminal, no protocol).

MCP restricts `requestedSchema` to a flat object whose properties are primitives: strings (with
`format` email, uri, date or date-time and min/maxLength), numbers and integers (minimum/maximum),
booleans, single-select enums (`enum`, titled `oneOf` with const/title, or legacy `enumNames`), and
multi-select arrays (`items.enum` or `items.anyOf`, minItems/maxItems). Anything else is refused with
`UnsupportedSchema`, so a client never sends an answer it could not check.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from safedb.client.fields import (
    Choice,
    Default,
    ElicitationForm,
    FieldKind,
    FormField,
    InvalidValue,
    StringFormat,
    check_value,
)

logger = logging.getLogger(__name__)


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
        field = FormField(
            kind=FieldKind.INTEGER if kind_name == "integer" else FieldKind.NUMBER,
            minimum=_optional_number(spec, "minimum", name),
            maximum=_optional_number(spec, "maximum", name),
            **common,
        )
    elif kind_name == "boolean":
        field = FormField(kind=FieldKind.BOOLEAN, **common)
    elif kind_name == "array":
        field = _multi_choice_field(name, spec, common)
    else:
        raise UnsupportedSchema(f"property {name!r} has type {kind_name!r}, which elicitation forms do not support")
    if "default" in spec:
        field = _with_default(field, spec["default"])
    return field


def _string_field(name: str, spec: Mapping[str, Any], common: dict[str, Any]) -> FormField:
    if "oneOf" in spec or "anyOf" in spec:
        return FormField(
            kind=FieldKind.CHOICE, choices=_titled_choices(name, spec.get("oneOf", spec.get("anyOf"))), **common
        )
    if "enum" in spec:
        values = _string_list(spec["enum"], name, "enum")
        names = spec.get("enumNames")
        labels = _string_list(names, name, "enumNames") if names is not None else values
        if len(labels) != len(values):
            raise UnsupportedSchema(f"property {name!r}: enumNames and enum differ in length")
        return FormField(
            kind=FieldKind.CHOICE,
            choices=tuple(Choice(v, label) for v, label in zip(values, labels, strict=True)),
            **common,
        )
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
        **common,
    )


def _multi_choice_field(name: str, spec: Mapping[str, Any], common: dict[str, Any]) -> FormField:
    items = spec.get("items")
    if not isinstance(items, Mapping):
        raise UnsupportedSchema(f"property {name!r} is an array without an 'items' schema")
    if "anyOf" in items or "oneOf" in items:
        choices = _titled_choices(name, items.get("anyOf", items.get("oneOf")))
    elif "enum" in items:
        choices = tuple(Choice(value, value) for value in _string_list(items["enum"], name, "items.enum"))
    else:
        raise UnsupportedSchema(f"property {name!r} is an array that is not a multi-select enum")
    return FormField(
        kind=FieldKind.MULTI_CHOICE,
        choices=choices,
        min_items=_optional_count(spec, "minItems", name),
        max_items=_optional_count(spec, "maxItems", name),
        **common,
    )


def _titled_choices(name: str, options: Any) -> tuple[Choice, ...]:
    if not isinstance(options, list) or not options:
        raise UnsupportedSchema(f"property {name!r}: oneOf/anyOf must be a non-empty list of {{const, title}}")
    choices = []
    for option in options:
        if not isinstance(option, Mapping) or not isinstance(option.get("const"), str):
            raise UnsupportedSchema(f"property {name!r}: every option needs a string 'const'")
        title = option.get("title")
        choices.append(Choice(option["const"], title if isinstance(title, str) else option["const"]))
    return tuple(choices)


def _with_default(field: FormField, value: Any) -> FormField:
    """Keep a default only when it fits the field; a server's bad default is dropped, never sent."""
    try:
        checked = check_value(field, value)
    except InvalidValue as exc:
        logger.warning("Ignoring default %r of field %r: %s", value, field.name, exc)
        return field
    return replace(field, default=Default(checked))


def _optional_str(spec: Mapping[str, Any], key: str) -> str | None:
    value = spec.get(key)
    return value if isinstance(value, str) else None


def _optional_number(spec: Mapping[str, Any], key: str, name: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedSchema(f"property {name!r}: {key} is not a number")
    return value


def _optional_count(spec: Mapping[str, Any], key: str, name: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedSchema(f"property {name!r}: {key} is not a non-negative integer")
    return value


def _string_list(values: Any, name: str, key: str) -> tuple[str, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise UnsupportedSchema(f"property {name!r}: {key} must be a non-empty list of strings")
    if not all(isinstance(value, str) for value in values):
        raise UnsupportedSchema(f"property {name!r}: {key} must list strings only")
    return tuple(values)
