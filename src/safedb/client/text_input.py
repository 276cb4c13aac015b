"""What a person types for one field, turned into the value to send (pure).

Booleans take yes/no, y/n, true/false, 1/0; a choice takes its number in the list, its value or its
label, or a unique beginning of its value or label; numbers take decimal notation.
Choices are numbered only when no value or label is itself a number: "1" would then be ambiguous, so
it always means the value or label "1". A typed number is never read as the beginning of a value or
label.
A multi-select takes several choices separated by commas; a value or label that contains a comma is
put in double quotes (`"Smith, John", Doe`), and `-` alone chooses none (when the schema allows none).
An empty answer means "leave this optional field out" (a required field asks again).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from typing import Any

from safedb.client.fields import FieldKind, FormField, InvalidValue, check_value

_TRUE = frozenset({"y", "yes", "true", "t", "1", "on"})
_FALSE = frozenset({"n", "no", "false", "f", "0", "off"})
NO_CHOICE = "-"
"""Typed alone in a multi-select: choose none of the options."""


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
            value = _choices(field, stripped)
    return check_value(field, value)


def value_text(field: FormField, value: Any) -> str:
    """How a value is shown in an input line (the inverse of `parse_text`)."""
    match field.kind:
        case FieldKind.BOOLEAN:
            return "yes" if value else "no"
        case FieldKind.MULTI_CHOICE:
            return ", ".join(_quoted(str(item)) for item in value) or no_choice(field)
        case _:
            return str(value)


def value_label(field: FormField, value: Any) -> str:
    """How a value is shown in a summary: labels for choices, yes/no for booleans."""
    if field.kind is FieldKind.CHOICE:
        choice = field.choice_for(value)
        return choice.label if choice is not None and choice.label != value else str(value)
    if field.kind is FieldKind.MULTI_CHOICE:
        labels = [choice.label if (choice := field.choice_for(item)) else str(item) for item in value]
        return ", ".join(_quoted(label) for label in labels) or "(none)"
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
            if any("," in choice.value or "," in choice.label for choice in field.choices):
                parts.append('a choice with a comma goes in "double quotes"')
            if field.allows_no_choice:
                parts.append(f"{no_choice(field)} for none")
        case FieldKind.TEXT:
            parts.append(field.string_format.value if field.string_format is not None else "text")
            if field.pattern is not None:
                parts.append(f"matching {field.pattern}")
    if field.allowed is not None:
        parts.append("one of " + ", ".join(value_text(field, value) for value in field.allowed))
    if field.minimum is not None or field.maximum is not None:
        parts.append(_range(field.minimum, field.maximum))
    if field.exclusive_minimum is not None:
        parts.append(f"more than {_number_text(field.exclusive_minimum)}")
    if field.exclusive_maximum is not None:
        parts.append(f"less than {_number_text(field.exclusive_maximum)}")
    if field.multiple_of is not None:
        parts.append(f"a multiple of {_number_text(field.multiple_of)}")
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


def no_choice(field: FormField) -> str:
    """What to type for no choice in a multi-select: `-`, unless an option is called that; then `""` (an empty
    item, which `_choices` leaves out)."""
    return '""' if field.choice_for(NO_CHOICE) is not None or _labelled(field, NO_CHOICE) else NO_CHOICE


def _choices(field: FormField, text: str) -> list[str]:
    if text == NO_CHOICE and field.choice_for(text) is None and not _labelled(field, text):
        return []
    try:
        items = next(csv.reader([text], skipinitialspace=True, strict=True))
    except csv.Error:
        raise InvalidValue('cannot read the list; put a choice with a comma in double quotes: "a, b", c') from None
    return list(dict.fromkeys(_choice(field, item.strip()) for item in items if item.strip()))


def _quoted(item: str) -> str:
    """The item as `_choices` reads it back: in double quotes when it has a comma or starts with a quote."""
    return '"' + item.replace('"', '""') + '"' if "," in item or item.lstrip().startswith('"') else item


def _labelled(field: FormField, text: str) -> bool:
    return any(choice.label.casefold() == text.casefold() for choice in field.choices)


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
    if len(by_prefix) == 1 and not _is_number(text):  # "1" is the value or label 1, never the start of "10"
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
