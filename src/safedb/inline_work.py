"""When short blocking work may run on the event loop's own thread instead of a worker thread.

Handing work to a worker thread and back costs more CPU than a millisecond of SQLite work: the thread
has to take the GIL from the busy event loop and give it back, several times per call. So work that
is known to be short runs on the event loop's thread. Work whose length SQLite cannot bound (a commit
waits for the disk to sync) runs there only while it has lately been quick, as `RecentDuration`
measures.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# Work expected to finish within this many seconds may run on the event loop's thread.
INLINE_BUDGET = 0.002

# How much each new measurement moves the running average: about the last ten count.
_WEIGHT = 0.2


class RecentDuration:
    """A running average of how long some blocking work took, wherever it ran."""

    def __init__(self, budget: float = INLINE_BUDGET) -> None:
        self.budget = budget
        self.average = 0.0

    def within_budget(self) -> bool:
        """Whether the work has lately been quick enough to run on the event loop's thread."""
        return self.average <= self.budget

    def add(self, seconds: float) -> None:
        self.average += (seconds - self.average) * _WEIGHT

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Measure the work in the block, whether it succeeds or fails."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(time.monotonic() - start)
