"""A server process as Linux reports it in /proc: CPU time, resident memory, peak resident memory."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_seconds: float
    """User + system CPU time of the whole process (all its threads) so far."""
    rss_kib: int
    """VmRSS: resident memory now."""
    hwm_kib: int
    """VmHWM: the highest resident memory since start (or since `reset_peak`)."""


def sample(pid: int) -> ProcSample:
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the command name (which may contain spaces) start at field 3; utime and stime are 14, 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            status[name] = int(value.split()[0])
    return ProcSample(cpu, status.get("VmRSS", 0), status.get("VmHWM", 0))


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux `clear_refs` value 5); False when the kernel refuses."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def machine_busy_seconds() -> float:
    """CPU time all cores of the machine spent busy (not idle, not waiting for I/O) since boot."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user time.
    return (sum(fields[:8]) - idle) / _TICKS


def own_cpu_seconds() -> float:
    """CPU time of this process (the load generator), all threads."""
    times = os.times()
    return times.user + times.system


class PeakWatcher:
    """Samples a process's RSS every `interval` seconds in the background; `peak_kib` is the highest seen.

    Used beside VmHWM, which counts only when the kernel's reset of it is allowed.
    """

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        while True:
            self.peak_kib = max(self.peak_kib, sample(self.pid).rss_kib)
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> PeakWatcher:
        self.peak_kib = sample(self.pid).rss_kib
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.peak_kib = max(self.peak_kib, sample(self.pid).rss_kib)
