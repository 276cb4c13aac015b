"""What a person types for one field, turned into the value to send (pure).

Booleans take yes/no, y/n, true/false, 1/0; a choice takes its number in the list, its value or its
label; a multi-select takes several of those separated by commas; numbers take decimal notation.
Choices are numbered only when no value or label is itself a number: "1" would then be ambiguous, so
it always means the value or label "1".
An empty answer means "leave this optional field out" (a required field asks again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from safedb.client.fields import FieldKind, FormField, InvalidValue, check_value

_TRUE = frozenset({"y", "yes", "true", "t", "1", "on"})
_FALSE = frozenset({"n", "no", "false", "f", "0", "off"})


@dataclass(frozen=True)
class Skipped:
    """The person left an optional field out: it is not sent at all (never as null)."""


def parse_text(field: FormField, text: str) -> Any:
    """The checked value for what was typed, or `Skipped()` for an optional field left empty.

    A choice may also be given by a unique beginning of its label or value, or by its number in the list
    when the list is `numbered`.

    Raises:
        InvalidValue: the text is not a valid answer for the field; the message says why.
    """
    stripped = text.strip()
    if not stripped:
        if field.required:
            raise InvalidValue("this field is required")
        return Skipped()
    match field.kind:
        case FieldKind.TEXT:
            value: Any = text
        case FieldKind.BOOLEAN:
            value = _boolean(stripped)
        case FieldKind.NUMBER | FieldKind.INTEGER:
            value = _number(stripped, field.kind)
        case FieldKind.CHOICE:
            value = _choice(field, stripped)
        case FieldKind.MULTI_CHOICE:
            value = list(dict.fromkeys(_choice(field, part.strip()) for part in stripped.split(",") if part.strip()))
    return check_value(field, value)


def value_text(field: FormField, value: Any) -> str:
    """How a value is shown in an input line (the inverse of `parse_text`)."""
    match field.kind:
        case FieldKind.BOOLEAN:
            return "yes" if value else "no"
        case FieldKind.MULTI_CHOICE:
            return ", ".join(str(item) for item in value)
        case _:
            return str(value)


def value_label(field: FormField, value: Any) -> str:
    """How a value is shown in a summary: labels for choices, yes/no for booleans."""
    if field.kind is FieldKind.CHOICE:
        choice = field.choice_for(value)
        return choice.label if choice is not None and choice.label != value else str(value)
    if field.kind is FieldKind.MULTI_CHOICE:
        labels = [choice.label if (choice := field.choice_for(item)) else str(item) for item in value]
        return ", ".join(labels) or "(none)"
    return value_text(field, value)


def numbered(field: FormField) -> bool:
    """Whether the field's choices are listed with numbers to type: not when a value or label is a number."""
    return not any(_is_number(choice.value) or _is_number(choice.label) for choice in field.choices)


def hint(field: FormField) -> str:
    """A short description of what the field accepts, shown next to the prompt."""
    parts: list[str] = []
    match field.kind:
        case FieldKind.BOOLEAN:
            parts.append("yes/no")
        case FieldKind.INTEGER:
            parts.append("whole number")
        case FieldKind.NUMBER:
            parts.append("number")
        case FieldKind.CHOICE:
            parts.append("one of the numbers or values above" if numbered(field) else "one of the values above")
        case FieldKind.MULTI_CHOICE:
            parts.append(f"{'numbers or ' if numbered(field) else ''}values above, separated by commas")
        case FieldKind.TEXT:
            parts.append(field.string_format.value if field.string_format is not None else "text")
    if field.minimum is not None or field.maximum is not None:
        parts.append(_range(field.minimum, field.maximum))
    if field.min_length is not None or field.max_length is not None:
        parts.append(_range(field.min_length, field.max_length) + " characters")
    if field.min_items is not None or field.max_items is not None:
        parts.append(_range(field.min_items, field.max_items) + " choices")
    parts.append("required" if field.required else "optional, Enter to leave out")
    return ", ".join(parts)


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InvalidValue("answer yes or no")


def _number(text: str, kind: FieldKind) -> int | float:
    try:
        value = json.loads(text)
    except ValueError:  # not JSON, or a number with more digits than Python converts
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValue(
            "must be a whole number" if kind is FieldKind.INTEGER else "must be a number, like 42 or 3.5"
        )
    return value


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _choice(field: FormField, text: str) -> str:
    if _is_number(text) and numbered(field) and 1 <= int(text) <= len(field.choices):
        return field.choices[int(text) - 1].value
    if field.choice_for(text) is not None:
        return text
    by_label = [choice for choice in field.choices if choice.label.casefold() == text.casefold()]
    if len(by_label) == 1:
        return by_label[0].value
    by_value = [choice for choice in field.choices if choice.value.casefold() == text.casefold()]
    if len(by_value) == 1:
        return by_value[0].value
    folded = text.casefold()
    by_prefix = {
        choice.value
        for choice in field.choices
        if choice.label.casefold().startswith(folded) or choice.value.casefold().startswith(folded)
    }
    if len(by_prefix) == 1:
        return by_prefix.pop()
    options = [choice.label for choice in field.choices]
    if numbered(field):
        options = [f"{number} {label}" for number, label in enumerate(options, start=1)]
    raise InvalidValue(f"{text!r} is not one of the options ({', '.join(options)})")


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{_number_text(low)} to {_number_text(high)}"
    if low is not None:
        return f"at least {_number_text(low)}"
    return f"at most {_number_text(high)}"


def _number_text(value: float | None) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
