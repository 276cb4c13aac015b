"""When short blocking work may run on the event loop's own thread instead of a worker thread.

Handing work to a worker thread and back costs more CPU than a millisecond of SQLite work: the thread
has to take the GIL from the busy event loop and give it back, several times per call. So work that
is known to be short runs on the event loop's thread. Work whose length SQLite cannot bound (a commit
waits for the disk to sync) runs there only while it has lately been quick, as `RecentDuration`
measures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Work expected to finish within this many seconds may run on the event loop's thread.
INLINE_BUDGET = 0.002

# Statements up to this long are classified on the event loop's thread (parsing one takes a millisecond or two
# at most); longer ones in a worker thread.
INLINE_STATEMENT_CHARS = 1000

# Statements longer than this are classified one at a time. Classifying one builds Python objects for each of
# its tokens (and, on SQLite, of the instructions of its compiled program), where no time limit reaches: for
# 1,000,000 characters of `SELECT 1 IN (1, 1, ...)` some 850 MiB and 8 s on SQLite, seconds on PostgreSQL; four
# at once took 2.6 GB and both cores for longer than their time limit. Shorter ones take at most some 85 MiB and
# a second, and run side by side.
LONG_STATEMENT_CHARS = 100_000

# How much each new measurement moves the running average: about the last twenty count, so one slow
# moment (a checkpoint, a busy disk) does not move the work off the event loop by itself.
_WEIGHT = 0.1

# A measurement counts for at most this many budgets, so that one stall of the disk, however long, does not
# move the work off the event loop's thread by itself either.
_MOST_BUDGETS = 5


class RecentDuration:
    """A running average of how long some blocking work took on the event loop's thread.

    Past the budget the work runs in worker threads, and once every `retry_after` seconds on the event
    loop's thread again, to see whether it has become quick. Only time measured there counts: in a worker
    thread, the time includes waiting for the GIL, and counting it would keep the work away for good.
    """

    def __init__(self, budget: float = INLINE_BUDGET, retry_after: float = 1.0) -> None:
        self.budget = budget
        self.average = 0.0
        self._retry_after = retry_after
        self._last_try = -math.inf

    def within_budget(self) -> bool:
        """Whether to run the work on the event loop's thread this time (and measure it with `timing`)."""
        if self.average <= self.budget:
            return True
        now = time.monotonic()
        if now - self._last_try >= self._retry_after:
            self._last_try = now
            return True
        return False

    def add(self, seconds: float) -> None:
        if self.average > self.budget and seconds <= self.budget:
            # A retry found the work quick again: back to the event loop's thread at once, rather than
            # after the many retries (a second apart) that averaging the slow past away would take.
            self.average = seconds
        else:
            self.average += (min(seconds, _MOST_BUDGETS * self.budget) - self.average) * _WEIGHT

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Measure the work in the block, whether it succeeds or fails."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(time.monotonic() - start)
