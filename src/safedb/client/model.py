"""`schema_to_model`: a pydantic model class that validates exactly like a requested schema.

Property names that are not usable Python attribute names (`first-name`, `class`, `model_config`)
get a safe attribute name and keep the original as their alias: the model reads and writes the
original names, so `model_validate(content)` and `dump_content(instance)` speak the wire format.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from safedb.client.fields import ElicitationForm, FormField, InvalidValue, field_type
from safedb.client.schema import parse_requested_schema


class InvalidAnswer(ValueError):
    """An answer that does not fit the requested schema; `problems` maps field names to reasons."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{name}: {reason}" for name, reason in self.problems.items()))


def schema_to_model(requested_schema: Mapping[str, Any], name: str = "ElicitationAnswer") -> type[BaseModel]:
    """A model class for the schema: required fields are required, optional ones default to the schema's
    default (or are left out when there is none), extra fields and nulls are refused.

    Raises:
        UnsupportedSchema: the schema is not a flat object of supported primitives.
    """
    return form_model(parse_requested_schema(requested_schema), name)


def form_model(form: ElicitationForm, name: str = "ElicitationAnswer") -> type[BaseModel]:
    definitions: dict[str, Any] = {}
    for attribute, field in zip(_attribute_names(form), form.fields, strict=True):
        definitions[attribute] = _definition(field)
    config = ConfigDict(
        extra="forbid", validate_by_alias=True, validate_by_name=False, serialize_by_alias=True, title=form.title
    )
    model: type[BaseModel] = create_model(name, __config__=config, __doc__=form.description, **definitions)
    return model


def dump_content(answer: BaseModel) -> dict[str, Any]:
    """The answer as elicitation content: original field names, JSON values, skipped optional fields left out."""
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True)


def validate_content(form: ElicitationForm, content: Mapping[str, Any]) -> dict[str, Any]:
    """Check a whole answer against the form; return exactly the given fields, as they will be sent.

    Defaults are not added here: whoever builds the answer decides whether to pre-fill them.

    Raises:
        InvalidAnswer: one or more fields do not fit, or names are unknown.
    """
    model = form_model(form)
    try:
        answer = model.model_validate(dict(content))
    except ValidationError as exc:
        raise InvalidAnswer(problems_by_field(exc)) from None
    return answer.model_dump(mode="json", by_alias=True, exclude_unset=True)


def default_content(form: ElicitationForm) -> dict[str, Any]:
    """The schema's defaults, as a starting answer."""
    return {field.name: field.default.value for field in form.fields if field.default is not None}


def problems_by_field(error: ValidationError) -> dict[str, str]:
    problems: dict[str, list[str]] = {}
    for detail in error.errors(include_url=False):
        location = detail["loc"]
        name = str(location[0]) if location else "(form)"
        if detail["type"] == "extra_forbidden":
            message = "is not a field of this form"
        elif detail["type"] == "missing":
            message = "is required"
        else:
            message = str(detail["msg"]).removeprefix("Value error, ")
            items = [step for step in location[1:] if isinstance(step, int)]
            if items:
                message = f"item {items[-1] + 1}: {message}"
        problems.setdefault(name, []).append(message)
    return {name: "; ".join(dict.fromkeys(messages)) for name, messages in problems.items()}


def _definition(field: FormField) -> tuple[Any, Any]:
    value_type = field_type(field)
    if field.required:
        return value_type, Field(alias=field.name, title=field.title, description=field.description)
    default = field.default.value if field.default is not None else None
    # Optional: absent means "left out"; an explicit null is refused, since no schema type allows it.
    return (
        Annotated[value_type | None, BeforeValidator(_not_null)],
        Field(default=default, alias=field.name, title=field.title, description=field.description),
    )


def _not_null(value: Any) -> Any:
    if value is None:
        raise InvalidValue("must not be null; leave the field out instead")
    return value


def _attribute_names(form: ElicitationForm) -> list[str]:
    taken: set[str] = set()
    names = []
    for index, field in enumerate(form.fields):
        candidate = field.name
        if not _usable_attribute(candidate):
            base = re.sub(r"\W+", "_", candidate).strip("_").lower() or f"field_{index}"
            candidate = base if base[0].isalpha() else f"field_{base}"
            if not _usable_attribute(candidate):
                candidate = f"field_{candidate}"
        while candidate in taken or (candidate != field.name and candidate in {f.name for f in form.fields}):
            candidate += "_"
        taken.add(candidate)
        names.append(candidate)
    return names


def _usable_attribute(name: str) -> bool:
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith(("_", "model_"))
        and not hasattr(BaseModel, name)
    )
