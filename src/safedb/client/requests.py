"""What an elicitation is about (who asks, in which era, for which tool) and who answers it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from safedb.client.sanitize import shown_text


class Era(StrEnum):
    HANDSHAKE = "handshake"
    """2025-06-18 / 2025-11-25: the server sends elicitation/create during the call; URL mode ends with
    a completion notification."""
    INPUT_REQUIRED = "input-required"
    """2026-07-28: the call returns the question; the client retries with the answer."""


@dataclass(frozen=True)
class ServerIdentity:
    name: str | None
    """The name the server reported about itself (not verified: any server can claim any name)."""
    target: str
    """The URL or command this client connected to."""

    def describe(self) -> str:
        name = shown_text(self.name, multiline=False) if self.name else "(unnamed server)"
        return f"{name} at {self.target}"


@dataclass(frozen=True)
class QueuePosition:
    number: int
    total: int


@dataclass(frozen=True)
class ElicitationRequest:
    server: ServerIdentity
    params: ElicitRequestFormParams | ElicitRequestURLParams
    era: Era
    tool: str | None = None
    """The tool being called when the question came, when exactly one call was running."""
    position: QueuePosition | None = None


class Answerer(Protocol):
    """Someone who answers elicitations: the person at the terminal, answer rules, or a program."""

    async def answer(self, request: ElicitationRequest) -> ElicitResult: ...
