"""Several elicitations arriving at once are answered one at a time, each shown as "n of total"; what the server
writes on its own meanwhile is shown once they are answered."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace

import anyio
from mcp_types import ElicitResult

from safedb.client.requests import Answerer, ElicitationRequest, QueuePosition

logger = logging.getLogger(__name__)

BATCH_WINDOW = 0.15
"""Seconds the first question of a batch waits for siblings, so that it can say "1 of 3" rather than "1"."""
HELD_OUTPUT = 1000
"""Lines from the server kept back while questions are open (`show_when_no_question`); older ones are dropped."""


class ElicitationQueue:
    """Serialises an answerer. The count starts afresh once every waiting question is answered."""

    def __init__(self, answerer: Answerer, batch_window: float = BATCH_WINDOW) -> None:
        self._answerer = answerer
        self._batch_window = batch_window
        self._turn = anyio.Lock()
        self._open: set[anyio.CancelScope] = set()
        """One scope per question waiting or being answered."""
        self._all_closed = anyio.Event()
        self._arrived = 0
        self._answered = 0
        self._held: deque[Callable[[], None]] = deque(maxlen=HELD_OUTPUT)
        self._dropped = 0

    def show_when_no_question(self, show: Callable[[], None]) -> None:
        """Run `show`, which writes something the server sent of its own accord (a line of its stderr, a log
        message) to the terminal: now, or, while a question is open, once every question is answered. Written
        meanwhile, it could push the question's `Server:` line out of view and draw one of its own."""
        if not self._open:
            show()
            return
        if len(self._held) == HELD_OUTPUT:
            self._dropped += 1
        self._held.append(show)

    def _show_held(self) -> None:
        if self._dropped:
            logger.warning(
                "The server wrote %s more lines while a question was open; only its last %s are shown.",
                f"{self._dropped:,}",
                f"{HELD_OUTPUT:,}",
            )
            self._dropped = 0
        while self._held:
            self._held.popleft()()

    async def answer(self, request: ElicitationRequest) -> ElicitResult:
        """The answerer's answer; "cancel" when the question is withdrawn before it is answered."""
        with anyio.CancelScope() as scope:
            if not self._open:
                self._all_closed = anyio.Event()
            self._open.add(scope)
            self._arrived += 1
            first_of_batch = self._arrived == 1
            try:
                # The lock queues its waiters in arrival order: the first question waits for its siblings while
                # holding it, so that none of them is asked before it.
                async with self._turn:
                    if first_of_batch and self._batch_window > 0:
                        await anyio.sleep(self._batch_window)  # questions sent together arrive within moments
                    position = QueuePosition(self._answered + 1, self._arrived)
                    try:
                        return await self._answerer.answer(replace(request, position=position))
                    finally:
                        self._answered += 1
            finally:
                self._open.discard(scope)
                if not self._open:
                    self._arrived = 0
                    self._answered = 0
                    self._all_closed.set()
                    self._show_held()
        return ElicitResult(action="cancel")

    async def withdraw_all(self) -> None:
        """Stop asking every open question (each answers "cancel"); return once all have ended."""
        if not self._open:
            return
        for scope in self._open:
            scope.cancel()
        await self._all_closed.wait()
