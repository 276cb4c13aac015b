"""Which JSON Schema keywords the client checks, at each place in a requested schema (pure).

A keyword the client does not check could forbid answers the client would send, so `schema.py` refuses
a schema that carries one. Annotations constrain nothing and are ignored, as are extension keywords
(`x-...`), which no JSON Schema validator enforces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)

FORM = frozenset({"type", "properties", "required", "$schema", "additionalProperties"})
"""`additionalProperties` only speaks of properties the schema does not define, which are never sent."""
TEXT = frozenset({"type", "format", "minLength", "maxLength", "pattern"})
SINGLE_CHOICE = frozenset({"type", "enum", "enumNames", "oneOf", "anyOf", "const"})
NUMBER = frozenset(
    {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "const"}
)
BOOLEAN = frozenset({"type", "enum", "const"})
MULTI_CHOICE = frozenset({"type", "items", "minItems", "maxItems", "uniqueItems"})
CHOICE_ITEMS = frozenset({"type", "enum", "anyOf", "oneOf"})
TITLED_OPTION = frozenset({"const", "title"})


def unchecked_keywords(spec: Mapping[str, Any], checked: frozenset[str]) -> list[str]:
    """The keywords of `spec` that are neither in `checked` nor annotations, in schema order."""
    return [
        keyword
        for keyword in spec
        if keyword not in checked and keyword not in ANNOTATIONS and not str(keyword).startswith("x-")
    ]
