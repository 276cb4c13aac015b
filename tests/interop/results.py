"""The latest run's results, one JSON file per client case or conformance era, under `.cache/interop/results/`.

The tests write them as they run; `python -m tests.interop.report` turns them into the README's table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.interop.environments import CACHE

RESULTS = CACHE / "results"


def record(kind: str, name: str, result: dict[str, Any]) -> None:
    directory = RESULTS / kind
    directory.mkdir(parents=True, exist_ok=True)
    staged = directory / f".{name}.json.tmp"
    staged.write_text(json.dumps(result, indent=2) + "\n")
    staged.replace(directory / f"{name}.json")


def load(kind: str) -> dict[str, dict[str, Any]]:
    directory = RESULTS / kind
    if not directory.is_dir():
        return {}
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def clear() -> None:
    for path in RESULTS.glob("*/*.json") if RESULTS.is_dir() else ():
        Path(path).unlink()
