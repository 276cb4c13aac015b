"""`RecentDuration`: work moves off the event loop's thread while it has lately been slow there, and is
tried there again now and then."""

from __future__ import annotations

import time

from safedb.inline_work import RecentDuration


def test_work_that_turned_slow_moves_off_the_event_loop_until_a_retry_finds_it_quick() -> None:
    recent = RecentDuration(budget=0.002, retry_after=0.2)
    for _ in range(20):
        recent.add(0.0004)
    assert recent.within_budget()
    recent.add(0.010)  # one checkpoint: not enough to move the work
    assert recent.within_budget()
    recent.add(0.050)  # a commit that waited 50 ms for a slow disk, right after
    assert recent.average > recent.budget
    assert recent.within_budget()  # the first retry comes at once...
    recent.add(0.030)  # ...and finds it still slow
    assert not recent.within_budget()  # so the work stays in worker threads
    time.sleep(0.25)
    assert recent.within_budget()  # until the next retry...
    recent.add(0.0004)  # ...which finds it quick again
    assert recent.within_budget()
    assert recent.within_budget()


def test_one_stall_however_long_does_not_move_the_work() -> None:
    recent = RecentDuration(budget=0.002, retry_after=60)
    for _ in range(20):
        recent.add(0.0004)
    recent.add(5.0)
    assert recent.within_budget()
    for _ in range(20):
        recent.add(0.0004)
    recent.add(5.0)
    assert recent.within_budget()


def test_timing_counts_work_that_fails() -> None:
    recent = RecentDuration(budget=0.001)
    try:
        with recent.timing():
            sum(range(100_000))
            raise RuntimeError("the work failed")
    except RuntimeError:
        pass
    assert recent.average > 0
