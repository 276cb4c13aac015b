"""Form fields and what each accepts: the typed core shared by the form, the rules and `schema_to_model`.

`field_type` turns a field into the pydantic type that checks one value exactly as the requested
schema would; `check_value` applies it and explains a refusal in one line a person can act on.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import StrEnum
from fractions import Fraction
from typing import Annotated, Any
from urllib.parse import urlsplit

import regex
from pydantic import AfterValidator, BeforeValidator, Field, Strict, StringConstraints, TypeAdapter, ValidationError

_SECRET_WORDS = re.compile(
    r"\bpass(word|wd|phrase|code)?\b|secret|token|api[\s_-]?key|apikey|credential|private[\s_-]?key|"
    r"\bpin\b|\bssn\b|credit[\s_-]?card|card[\s_-]?number|\bcvv\b|\bcvc\b|\botp\b",
    re.IGNORECASE,
)
_CAMEL_CASE = re.compile(r"(?<=[a-z])(?=[A-Z])")
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EMAIL = re.compile(rf"^{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+$")
"""RFC 5321's mailbox with a dot-atom local part (ASCII: non-ASCII addresses are format idn-email) and a host name
with a dot (`name@localhost` is a mailbox too, but the checks servers run, AJV's and pydantic's, refuse it)."""
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
_URI_CHARACTERS = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$")
"""RFC 3986: what a URI may hold, a % only as the start of a percent-encoded byte (non-ASCII makes it an IRI)."""
_FULL_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_LINE_BREAK = re.compile("[\n\r\u2028\u2029]")
PATTERN_TIME_LIMIT = 0.25
"""Seconds one value's match against a server's pattern may take. A pattern can backtrack for hours on a short value
(`^(a|aa)+$`), and the standard library's `re` cannot be stopped, not even by Ctrl-C; `regex` can."""
_ECMA_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
"""ECMA-262's \\s: white space (with every Unicode space separator) and line terminators; with `re.ASCII`, Python's
\\s is only the ASCII ones, so a pattern such as `^\\S+$` would let a no-break space through."""
_ECMA_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")


class InvalidValue(ValueError):
    """A value that does not fit its field; the message says why, for a person to correct it."""


class FieldKind(StrEnum):
    TEXT = "text"
    NUMBER = "number"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    MULTI_CHOICE = "multi_choice"


class StringFormat(StrEnum):
    EMAIL = "email"
    URI = "uri"
    DATE = "date"
    DATE_TIME = "date-time"


@dataclass(frozen=True)
class Choice:
    """One option of an enum: the value sent, and the label shown."""

    value: str
    label: str


@dataclass(frozen=True)
class Default:
    """A field's default value (wrapped, so that "no default" and a default of a falsy value differ)."""

    value: Any


@dataclass(frozen=True)
class FormField:
    """One property of the requested schema, with everything needed to ask for it and check the answer."""

    name: str
    kind: FieldKind
    required: bool
    title: str | None = None
    description: str | None = None
    default: Default | None = None
    string_format: StringFormat | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    multiple_of: float | None = None
    allowed: tuple[Any, ...] | None = None
    """The only values a number or boolean field takes (its `enum` and `const`; a string's are `choices`)."""
    choices: tuple[Choice, ...] = ()
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False

    @property
    def label(self) -> str:
        return self.title or self.name

    @property
    def looks_secret(self) -> bool:
        """True when the name, title or description suggests a password, token, API key or the like."""
        text = " ".join(part for part in (self.name, self.title, self.description) if part)
        words = _CAMEL_CASE.sub(" ", text).replace("_", " ").replace("-", " ")
        return _SECRET_WORDS.search(words) is not None

    def choice_for(self, value: str) -> Choice | None:
        return next((choice for choice in self.choices if choice.value == value), None)

    @property
    def allows_no_choice(self) -> bool:
        """Whether a multi-select may be answered with an empty selection."""
        return not self.min_items


@dataclass(frozen=True)
class ElicitationForm:
    fields: tuple[FormField, ...]
    title: str | None = None
    description: str | None = None

    @property
    def secret_fields(self) -> tuple[FormField, ...]:
        return tuple(field for field in self.fields if field.looks_secret)


def field_type(field: FormField) -> Any:
    """The pydantic type that accepts exactly the values the field's schema accepts (never null)."""
    allowed = [] if field.allowed is None else [AfterValidator(_allowed(field.allowed))]
    match field.kind:
        case FieldKind.TEXT:
            checks: list[Any] = [Strict(), StringConstraints(min_length=field.min_length, max_length=field.max_length)]
            if field.string_format is not None:
                checks.append(AfterValidator(_FORMAT_CHECKS[field.string_format]))
            if field.pattern is not None:
                checks.append(AfterValidator(_matching(field.pattern)))
            return Annotated[str, *checks]
        case FieldKind.NUMBER | FieldKind.INTEGER:
            number_checks: list[Any] = [
                BeforeValidator(_integer if field.kind is FieldKind.INTEGER else _number),
                Field(ge=field.minimum, le=field.maximum, gt=field.exclusive_minimum, lt=field.exclusive_maximum),
            ]
            if field.multiple_of is not None:
                number_checks.append(AfterValidator(_multiple_of(field.multiple_of)))
            number = int if field.kind is FieldKind.INTEGER else int | float
            return Annotated[number, *number_checks, *allowed]
        case FieldKind.BOOLEAN:
            return Annotated[bool, Strict(), *allowed]
        case FieldKind.CHOICE:
            return Annotated[str, Strict(), AfterValidator(_one_of(field))]
        case FieldKind.MULTI_CHOICE:
            item = Annotated[str, Strict(), AfterValidator(_one_of(field))]
            unique = [AfterValidator(_unique)] if field.unique_items else []
            items = Field(min_length=field.min_items, max_length=field.max_items)
            return Annotated[list[item], Strict(), items, *unique]


def check_value(field: FormField, value: Any) -> Any:
    """The value, checked against the field (and normalised, e.g. 3.0 for an integer field becomes 3).

    Raises:
        InvalidValue: the value does not fit; the message says why.
    """
    try:
        return TypeAdapter(field_type(field)).validate_python(value)
    except ValidationError as exc:
        raise InvalidValue(describe_errors(exc)) from None


def describe_errors(error: ValidationError) -> str:
    """One line per problem, in words (pydantic's own messages, without its URLs)."""
    parts = []
    for detail in error.errors(include_url=False):
        message = str(detail["msg"]).removeprefix("Value error, ")
        position = [str(step) for step in detail["loc"] if isinstance(step, int)]
        parts.append(f"item {int(position[-1]) + 1}: {message}" if position else message)
    return "; ".join(dict.fromkeys(parts))


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


# Past 2**53 a float is not the whole number it was written as (1e23 is 99999999999999991611392).
_EXACT_FLOAT_INTEGERS = 2**53


def _integer(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        if abs(value) > _EXACT_FLOAT_INTEGERS:
            raise ValueError(
                "must be a whole number written in digits (a number this large in another form is not exact)"
            )
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return value


def _allowed(values: tuple[Any, ...]) -> Any:
    def check(value: Any) -> Any:
        if value not in values:  # the field's type check ran first: no True standing in for 1
            listed = ", ".join(json.dumps(allowed) for allowed in values)
            raise ValueError(f"must be {listed}" if len(values) == 1 else f"must be one of {listed}")
        return value

    return check


def _multiple_of(step: float) -> Any:
    # Exactly, on the numbers as written: 0.3 is a multiple of 0.1, although 0.3 / 0.1 in floats is not whole.
    exact_step = _exact(step)

    def check(value: int | float) -> int | float:
        if (_exact(value) / exact_step).denominator != 1:
            raise ValueError(f"must be a multiple of {json.dumps(step)}")
        return value

    return check


def _exact(number: float) -> Fraction:
    """The number as written in decimal (0.1 is 1/10, not the nearest binary fraction)."""
    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))


def python_pattern(pattern: str) -> str:
    """The schema's ECMA-262 pattern as a Python expression that means the same (see `compile_pattern`).

    Raises:
        re.error: the pattern uses syntax that the two dialects read differently and that is not translated.
    """
    parts: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        character = pattern[index]
        if character == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            index += 2
            if escaped == "s" and in_class:
                parts.append(_ECMA_SPACE)
                if pattern.startswith("-", index):  # `[\s-z]`: a "-" after a class escape is itself, not a range
                    parts.append("\\-")
                    index += 1
            elif escaped == "s":
                parts.append(f"[{_ECMA_SPACE}]")
            elif escaped == "S" and not in_class:
                parts.append(f"[^{_ECMA_SPACE}]")
            elif escaped in "SAZN":  # \\S in a class has no Python equivalent; \\A, \\Z, \\N are Python's own
                raise re.error(f"\\{escaped}{' in a character class' if escaped == 'S' else ''} is not translated")
            else:
                parts.append(character + escaped)
            continue
        if in_class:
            in_class = character != "]"
        elif character == "[":
            in_class = True
            if pattern.startswith(("[]", "[^]"), index):  # never / any character in ECMA-262, not in Python
                raise re.error("an empty character class is read differently in Python")
        elif character == "{" and pattern.startswith(",", index + 1):  # a quantifier in Python, text in ECMA-262
            raise re.error("{,n} is read differently in Python")
        elif character == "(" and pattern.startswith("(?", index) and not pattern.startswith(_ECMA_GROUPS, index):
            raise re.error("(?...) groups other than (?:, (?=, (?!, (?<= and (?<! are Python's own")
        parts.append(character)
        index += 1
    return "".join(parts)


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The schema's ECMA-262 pattern, compiled to be searched within `PATTERN_TIME_LIMIT`.

    Its dialect is the standard library's: a pattern `re` cannot read is refused, although `regex` reads more
    (such as `\\p{L}`, whose meaning in ECMA-262 depends on a flag the schema does not give). ECMA-262's `\\d`
    and `\\w` are ASCII, as they are here.

    Raises:
        re.error, regex.error: the pattern cannot be read, or not as ECMA-262 reads it.
    """
    translated = python_pattern(pattern)
    re.compile(translated, re.ASCII)
    return regex.compile(translated, regex.ASCII | regex.VERSION0)


def _matching(pattern: str) -> Any:
    compiled = compile_pattern(pattern)

    def check(value: str) -> str:
        # ECMA-262 and Python read `$` and `.` differently around line breaks; refusing them is the safe side.
        if _LINE_BREAK.search(value):
            raise ValueError("must be one line (the field has a pattern)")
        try:
            found = compiled.search(value, timeout=PATTERN_TIME_LIMIT)
        except TimeoutError:
            raise ValueError(f"cannot be checked against the pattern {pattern} in time; try a shorter value") from None
        if found is None:
            raise ValueError(f"must match the pattern {pattern}")
        return value

    return check


def _unique(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("must not choose an option twice")
    return values


def _one_of(field: FormField) -> Any:
    allowed = [choice.value for choice in field.choices]

    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of the options: {', '.join(allowed)}")
        return value

    return check


def _email(value: str) -> str:
    if not _EMAIL.fullmatch(value):
        raise ValueError("must be an email address, like name@example.com")
    return value


def _uri(value: str) -> str:
    parts = urlsplit(value)
    if (
        not parts.scheme
        or not _URI_SCHEME.fullmatch(parts.scheme)
        or any(c.isspace() or not c.isprintable() for c in value)
    ):
        raise ValueError("must be a URI with a scheme, like https://example.com/page")
    if not _URI_CHARACTERS.fullmatch(value):
        # Servers check the format strictly (the TypeScript SDK refuses such an answer, failing the call).
        raise ValueError(
            "must be a URI: letters other than ASCII and some symbols go percent-encoded, like %C3%A4 for ä"
        )
    if value.count("#") > 1 or any(bracket in parts.path + parts.query + parts.fragment for bracket in "[]"):
        raise ValueError("must be a URI: [ and ] only around an IPv6 address, # only once (elsewhere %5B, %5D, %23)")
    if not (parts.netloc or parts.path):
        raise ValueError("must be a URI with something after the scheme")
    return value


def _date(value: str) -> str:
    try:
        if _FULL_DATE.fullmatch(value):
            date.fromisoformat(value)
            return value
    except ValueError:
        pass
    raise ValueError("must be a date as YYYY-MM-DD, like 2025-12-31")


def _date_time(value: str) -> str:
    try:
        if _DATE_TIME.fullmatch(value):
            # RFC 3339 allows a leap second, 23:59:60 in UTC, which Python's datetime cannot hold: checked as :59.
            leap = value[17:19] == "60"
            moment = datetime.fromisoformat((value[:17] + "59" + value[19:] if leap else value).replace("z", "Z"))
            utc = moment.astimezone(UTC)
            if not leap or (utc.hour, utc.minute) == (23, 59):
                return value
    except ValueError:
        pass
    raise ValueError("must be a date and time with a time zone, like 2025-12-31T23:59:00Z or 2025-12-31T23:59:00+01:00")


_FORMAT_CHECKS = {
    StringFormat.EMAIL: _email,
    StringFormat.URI: _uri,
    StringFormat.DATE: _date,
    StringFormat.DATE_TIME: _date_time,
}
