"""Several elicitations arriving at once are answered one at a time, each shown as "n of total"."""

from __future__ import annotations

from dataclasses import replace

import anyio
from mcp_types import ElicitResult

from safedb.client.requests import Answerer, ElicitationRequest, QueuePosition

BATCH_WINDOW = 0.15
"""Seconds the first question of a batch waits for siblings, so that it can say "1 of 3" rather than "1"."""


class ElicitationQueue:
    """Serialises an answerer. The count starts afresh once every waiting question is answered."""

    def __init__(self, answerer: Answerer, batch_window: float = BATCH_WINDOW) -> None:
        self._answerer = answerer
        self._batch_window = batch_window
        self._turn = anyio.Lock()
        self._waiting = 0
        self._arrived = 0
        self._answered = 0

    async def answer(self, request: ElicitationRequest) -> ElicitResult:
        self._waiting += 1
        self._arrived += 1
        try:
            if self._arrived == 1 and self._batch_window > 0:
                await anyio.sleep(self._batch_window)  # questions sent together arrive within moments
            async with self._turn:
                position = QueuePosition(self._answered + 1, self._arrived)
                try:
                    return await self._answerer.answer(replace(request, position=position))
                finally:
                    self._answered += 1
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                self._arrived = 0
                self._answered = 0
