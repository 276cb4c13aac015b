"""Answer rules for unattended use (`--answers FILE`, `--decline-all`).

A rules file (JSON, or TOML when its name ends in .toml in any case) lists rules, tried in order; the
first that matches answers. A rule matches on the server (its reported name or the URL/command,
glob), the tool being called (glob), the message (regular expression, searched) and the mode (form
or url); a missing condition matches anything. Accepted content starts from the schema's defaults
and is checked against the schema like a typed answer: content that does not fit is never sent, the
question is cancelled instead. When no rule matches, the `default` action answers (decline unless
set); an accepting default gives the schema's defaults, checked likewise.

    {"default": "decline",
     "rules": [{"server": "SafeDB", "tool": "execute_query", "message": "DELETE FROM scratch_",
                "action": "accept", "content": {"confirm": true, "justification": "cleanup",
                                                "environment": "Development"}}]}
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp_types import ElicitRequestFormParams, ElicitResult
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from safedb.client.data_files import DataFileError, read_data_file
from safedb.client.model import InvalidAnswer, default_content, validate_content
from safedb.client.requests import ElicitationRequest
from safedb.client.sanitize import text_as_read
from safedb.client.schema import UnsupportedSchema, parse_requested_schema

logger = logging.getLogger(__name__)

Action = Literal["accept", "decline", "cancel"]


class RulesFileError(ValueError):
    """The rules file cannot be read or does not have the expected shape."""


class AnswerRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    server: str | None = Field(default=None, description="Glob on the server's reported name or its URL/command.")
    tool: str | None = Field(default=None, description="Glob on the name of the tool being called.")
    message: str | None = Field(default=None, description="Regular expression searched in the server's message.")
    mode: Literal["form", "url"] | None = None
    action: Action
    content: dict[str, Any] = Field(default_factory=dict, description="Form answers for accept (over the defaults).")

    @field_validator("message")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            # OverflowError: a repeat count past what `re` can count (`a{4294967296}`); RecursionError: nesting
            # deeper than the parser goes (thousands of parentheses).
            except (re.error, OverflowError, RecursionError) as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return pattern

    def matches(self, request: ElicitationRequest) -> bool:
        """Whether the request meets every condition of the rule. The server's name and message are matched as a
        person reads them (`text_as_read`): an escape sequence, an invisible character or a no-break space in
        `DROP TABLE` must not take a question past the rule that declines it, on to one that accepts."""
        params = request.params
        if self.mode is not None and params.mode != self.mode:
            return False
        if self.server is not None:
            names = [text_as_read(name) for name in (request.server.name, request.server.target) if name]
            if not any(fnmatch.fnmatchcase(name.casefold(), self.server.casefold()) for name in names):
                return False
        if self.tool is not None and (request.tool is None or not fnmatch.fnmatchcase(request.tool, self.tool)):
            return False
        return self.message is None or re.search(self.message, text_as_read(params.message)) is not None


class AnswerRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[AnswerRule, ...] = ()
    default: Action = "decline"

    def first_match(self, request: ElicitationRequest) -> tuple[int, AnswerRule] | None:
        return next(((number, rule) for number, rule in enumerate(self.rules, 1) if rule.matches(request)), None)


def load_rules(path: Path) -> AnswerRules:
    """Read a rules file.

    Raises:
        RulesFileError: unreadable, not UTF-8 JSON/TOML, or not the expected shape.
    """
    try:
        data = read_data_file(path, "answers file", toml=path.suffix.lower() == ".toml")
        return AnswerRules.model_validate(data)
    except DataFileError as exc:
        raise RulesFileError(str(exc)) from None
    except ValidationError as exc:
        raise RulesFileError(f"Answers file {path} does not have the expected shape: {shape_problems(exc)}") from None


def shape_problems(error: ValidationError) -> str:
    """Every problem on one line, each with where it is (`rules[2].action`) and what is wrong."""
    problems = []
    for detail in error.errors(include_url=False):
        where = "".join(f"[{step + 1}]" if isinstance(step, int) else f".{step}" for step in detail["loc"])
        if detail["type"] == "extra_forbidden":
            reason = "is not a known key"
        elif detail["type"] == "missing":
            reason = "is required"
        elif detail["type"] == "model_type":
            reason = "must be an object (a table in TOML)"
        else:
            given = repr(detail["input"])
            given = given if len(given) <= 60 else given[:57] + "..."
            reason = f"{str(detail['msg']).removeprefix('Value error, ')} (given: {given})"
        problems.append(f"{where.lstrip('.') or 'the whole file'}: {reason}")
    return "; ".join(problems)


@dataclass(frozen=True)
class RuleDecision:
    request: ElicitationRequest
    result: ElicitResult
    reason: str


class RuleAnswerer:
    """Answers elicitations from rules; `on_answer` hears about every decision (the CLI prints them)."""

    def __init__(self, rules: AnswerRules, on_answer: Callable[[RuleDecision], None] | None = None) -> None:
        self._rules = rules
        self._on_answer = on_answer

    async def answer(self, request: ElicitationRequest) -> ElicitResult:
        decision = decide(self._rules, request)
        logger.info(
            "Elicitation from %s answered %s: %s", request.server.describe(), decision.result.action, decision.reason
        )
        if self._on_answer is not None:
            self._on_answer(decision)
        return decision.result


def decide(rules: AnswerRules, request: ElicitationRequest) -> RuleDecision:
    """The answer the rules give to one request."""
    found = rules.first_match(request)
    if found is None:
        # An accepting default is an accept rule with no content of its own: checked against the form all the same.
        action, given, reason = rules.default, {}, "no rule matched, default action"
    else:
        number, rule = found
        action, given, reason = rule.action, rule.content, f"rule {number}"
    if action != "accept":
        return RuleDecision(request, ElicitResult(action=action), reason)
    if not isinstance(request.params, ElicitRequestFormParams):
        return RuleDecision(request, ElicitResult(action="accept"), f"{reason}: consent to the URL; nothing is opened")
    try:
        form = parse_requested_schema(request.params.requested_schema)
        content = validate_content(form, {**default_content(form), **given})
    except (UnsupportedSchema, InvalidAnswer) as exc:
        return RuleDecision(request, ElicitResult(action="cancel"), f"{reason} gave an answer that does not fit: {exc}")
    return RuleDecision(request, ElicitResult(action="accept", content=content), reason)
