"""`RecentDuration`: work moves off the event loop's thread while it has lately been slow."""

from __future__ import annotations

from safedb.inline_work import RecentDuration


def test_work_that_turned_slow_moves_off_the_event_loop_until_it_is_quick_again() -> None:
    recent = RecentDuration(budget=0.002)
    assert recent.within_budget()
    for _ in range(20):
        recent.add(0.0004)
    assert recent.within_budget()
    recent.add(0.050)  # one commit that waited 50 ms for a slow disk
    assert not recent.within_budget()
    quick_ones = 0
    while not recent.within_budget():
        recent.add(0.0004)
        quick_ones += 1
    assert 5 <= quick_ones <= 20, quick_ones


def test_timing_counts_work_that_fails() -> None:
    recent = RecentDuration(budget=0.0)
    try:
        with recent.timing():
            sum(range(100_000))
            raise RuntimeError("the work failed")
    except RuntimeError:
        pass
    assert recent.average > 0
