"""Filling in a form one field at a time, asking again with the reason until every answer fits (pure).

The loop does not know how questions reach the person: a `FieldReader` does (the terminal form, or a
script in tests). Defaults are offered as the pre-filled text; an empty optional answer leaves the
field out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from safedb.client.fields import ElicitationForm, FormField, InvalidValue
from safedb.client.model import validate_content
from safedb.client.text_input import Skipped, parse_text, value_text


@dataclass(frozen=True)
class FieldQuestion:
    """One question for the reader: the field, the text to pre-fill, and why the last answer was refused."""

    field: FormField
    number: int
    count: int
    prefilled: str
    problem: str | None = None


class FieldReader(Protocol):
    async def read(self, question: FieldQuestion) -> str:
        """What the person typed for this field. Raises whatever the reader uses to stop the form."""
        ...


async def fill_form(
    form: ElicitationForm, reader: FieldReader, start: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Ask every field and return the content to send; only values that fit their field are kept.

    `start` holds earlier answers to pre-fill (when the person goes back to edit); otherwise defaults.
    """
    answers: dict[str, Any] = {}
    for number, field in enumerate(form.fields, start=1):
        value = await _ask_field(field, reader, number, len(form.fields), _prefilled(field, start))
        if not isinstance(value, Skipped):
            answers[field.name] = value
    # Each field was checked on its own; the whole answer is checked once more, as it will be sent.
    return validate_content(form, answers)


async def _ask_field(field: FormField, reader: FieldReader, number: int, count: int, prefilled: str) -> Any:
    problem: str | None = None
    while True:
        text = await reader.read(FieldQuestion(field, number, count, prefilled, problem))
        try:
            return parse_text(field, text)
        except InvalidValue as exc:
            problem = str(exc)


def _prefilled(field: FormField, start: Mapping[str, Any] | None) -> str:
    if start is not None:
        return value_text(field, start[field.name]) if field.name in start else ""
    return value_text(field, field.default.value) if field.default is not None else ""
