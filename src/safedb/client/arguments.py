"""Tool arguments typed on a command line: `key=value` pairs read by the tool's input schema, or one JSON object.

`key=value` gives a string when the schema says string, and JSON otherwise (numbers, true/false,
arrays, objects), falling back to the plain string when the schema does not say and the text is not
JSON. `key:=value` always reads JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from safedb.cli_options import is_utf8


class ArgumentError(ValueError):
    """The arguments cannot be read; the message says which one and why."""


def schema_properties(input_schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A tool's declared properties; none when its schema (a server's, so of any shape) has no mapping of them."""
    properties = (input_schema or {}).get("properties")
    return properties if isinstance(properties, Mapping) else {}


def require_utf8(text: str, what: str) -> None:
    """Raise ArgumentError when `text` holds a byte no UTF-8 text holds (Python keeps one of a command line or a
    terminal as a lone surrogate, `\\udcff`), which could not be sent to the server."""
    if is_utf8(text):
        return
    surrogate = ord(next(character for character in text if 0xD800 <= ord(character) <= 0xDFFF))
    byte = f"0x{surrogate - 0xDC00:02x}" if 0xDC80 <= surrogate <= 0xDCFF else "a surrogate"
    raise ArgumentError(f"{what} {ascii(text)[:80]} is not UTF-8 text (it holds {byte})")


def parse_arguments(words: Sequence[str], input_schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    for word in words:
        require_utf8(word, "the argument")
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            value = json.loads(words[0])
        except ValueError as exc:  # not JSON, or a number with more digits than Python converts
            raise ArgumentError(f"The arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ArgumentError("JSON arguments must be an object")
        return value
    properties = schema_properties(input_schema)
    arguments: dict[str, Any] = {}
    for word in words:
        key, separator, raw = word.partition("=")
        if not separator or not key:
            raise ArgumentError(f"{word!r} is not key=value (or give one JSON object)")
        name = key.removesuffix(":")
        if name in arguments:  # the later one would win unseen: `query="SELECT 1" query="DROP TABLE t"`
            raise ArgumentError(f"{name!r} is given more than once")
        arguments[name] = _json(name, raw) if key.endswith(":") else _typed(key, raw, properties.get(key))
    return arguments


def _typed(key: str, raw: str, schema: Any) -> Any:
    types = _schema_types(schema)
    if "string" in types and not (types - {"string", "null"}):
        return raw
    if types:
        if "string" in types:
            try:
                return json.loads(raw)
            except ValueError:
                return raw
        return _json(key, raw)
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if not isinstance(value, str) else raw


def _json(key: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ArgumentError(f"{key}: {raw!r} is not valid JSON ({reason})") from None


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {str(item) for item in declared}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []) or []:
            found |= _schema_types(option)
    return found
