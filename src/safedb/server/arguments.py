"""Tool arguments that do not fit a tool's input schema, told in plain words: the SDK would pass on pydantic's
text, which names an internal model and links to pydantic's site."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def argument_error(tool: str, error: ValidationError, input_schema: Mapping[str, Any]) -> str:
    """What is wrong with the arguments of a call of `tool`, and what it takes."""
    problems = "; ".join(_problem(detail) for detail in error.errors())
    required = set(input_schema.get("required", ()))
    takes = ", ".join(
        f"`{name}` ({'required' if name in required else 'optional'})" for name in input_schema.get("properties", {})
    )
    return f"Invalid arguments for {tool}: {problems}. It takes {takes or 'no arguments'}."


def _problem(detail: ErrorDetails) -> str:
    name = ".".join(str(part) for part in detail["loc"])
    if detail["type"] == "missing":
        return f"`{name}` is missing"
    if detail["type"] == "string_type":
        return f"`{name}` must be text, not {_json_kind(detail['input'])}"
    message = detail["msg"]
    return f"`{name}`: {message[:1].lower()}{message[1:]}"


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
