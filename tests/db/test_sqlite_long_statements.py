"""Classifying long statements: Python work that no time limit reaches, so it is bounded by running one at a time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# Classifies `count` statements of `SELECT i IN (1, 1, ...)` at once (each `chars` long, each different) in a
# process of its own, and prints whether each is read-only and how much the process's peak memory grew.
_CLASSIFY_AT_ONCE = textwrap.dedent(
    """
    import sys, anyio
    from pathlib import Path
    from safedb.db.backend import QueryLimits
    from safedb.db.sqlite.backend import SqliteDatabase

    def peak():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) // 1024

    async def main(path, count, chars):
        database = SqliteDatabase(Path(path), QueryLimits(), readers=count)
        results = []

        async def classify(i):
            sql = f"SELECT {i} IN (" + ",".join(["1"] * (chars // 2)) + ")"
            results.append((await database.classify(sql)).read_only)

        try:
            await database.read(await database.classify("SELECT count(*) FROM items"))
            before = peak()
            async with anyio.create_task_group() as group:
                for i in range(count):
                    group.start_soon(classify, i)
            print(results)
            print("growth", peak() - before)
        finally:
            await database.aclose()

    anyio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    """
)


def test_long_statements_are_classified_one_at_a_time(database_file: Path) -> None:
    """Classifying a statement builds Python objects for each of its tokens and program instructions: four of
    150,000 characters at once, one on each inspector, grew the process by some 460 MiB, one at a time by 170
    (one of 1,000,000 characters takes 850 MiB and 8 s; four at once took 2.6 GB and both cores past their
    time limit)."""
    done = subprocess.run(
        [sys.executable, "-c", _CLASSIFY_AT_ONCE, str(database_file), "4", "150000"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    read_only, growth = done.stdout.splitlines()
    assert read_only == "[True, True, True, True]"
    assert int(growth.removeprefix("growth ")) < 300, growth
