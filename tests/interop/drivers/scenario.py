"""The scenario every driver runs, and the report it prints; standard library only, because each driver runs in
its client's own environment.

A driver gets one JSON argument (see `Config`), connects its client to SafeDB (a URL, or a `safedb serve
--transport stdio` command it starts itself), lists the tools, then runs three statements: a read (answered
with decline, should it ever be asked), a change it accepts and a change it declines. It prints one line,
`INTEROP-REPORT {json}`, with what it saw: the negotiated protocol version, the tool names, and for each step
the elicitations it was asked and the tool result.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

REPORT_PREFIX = "INTEROP-REPORT "
STEPS = ("read", "accept", "decline")


@dataclass(frozen=True)
class Config:
    mode: str
    statements: dict[str, str]
    answer: dict[str, Any]
    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def load_config() -> Config:
    raw = json.loads(sys.argv[1])
    return Config(
        mode=raw["mode"], statements=raw["statements"], answer=raw["answer"], url=raw.get("url"),
        command=raw.get("command"), args=raw.get("args", []), env=raw.get("env", {}), extra=raw.get("extra", {}),
    )  # fmt: skip


@dataclass
class Step:
    elicitations: list[dict[str, Any]] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None


class Recorder:
    """Remembers what each step was asked, and answers: accept in the accept step, decline anywhere else."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.steps: dict[str, Step] = {}
        self.current = ""

    def begin(self, step: str) -> None:
        self.current = step
        self.steps[step] = Step()

    def asked(self, message: str, schema: dict[str, Any] | None, mode: str = "form") -> str:
        """Record one elicitation of the current step; returns the action to answer it with."""
        action = "accept" if self.current == "accept" else "decline"
        step = self.steps[self.current]
        step.elicitations.append({
            "mode": mode,
            "message": message,
            "fields": sorted((schema or {}).get("properties", {})),
            "required": sorted((schema or {}).get("required", [])),
        })  # fmt: skip
        step.answered.append(action)
        return action

    def finished(self, *, is_error: bool, structured: dict[str, Any] | None, text: str) -> None:
        self.steps[self.current].result = {"is_error": is_error, "structured": structured, "text": text}

    def failed(self, error: BaseException) -> None:
        self.steps[self.current].error = f"{type(error).__name__}: {error}"


ToolCall = Callable[[str], Awaitable[tuple[bool, dict[str, Any] | None, str]]]


async def run_steps(recorder: Recorder, call: ToolCall) -> None:
    """Run the three statements through `call(sql) -> (is_error, structured_content, text)`."""
    for step in STEPS:
        recorder.begin(step)
        try:
            is_error, structured, text = await call(recorder.config.statements[step])
        except Exception as exc:
            recorder.failed(exc)
        else:
            recorder.finished(is_error=is_error, structured=structured, text=text)


def emit(client: str, version: str, protocol_version: str | None, tools: list[str], recorder: Recorder) -> None:
    report = {
        "client": client,
        "version": version,
        "mode": recorder.config.mode,
        "transport": "http" if recorder.config.url else "stdio",
        "protocol_version": protocol_version,
        "tools": sorted(tools),
        "steps": {name: vars(step) for name, step in recorder.steps.items()},
    }
    print(REPORT_PREFIX + json.dumps(report), flush=True)


def first_text(content: list[Any]) -> str:
    """The text of the first text block of a tool result (SDK objects or plain dicts)."""
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
        if kind == "text":
            return str(block["text"] if isinstance(block, dict) else block.text)
    return ""
