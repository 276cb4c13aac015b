"""Phrases that several messages share, so that they read the same everywhere."""

from __future__ import annotations


def rows(count: int) -> str:
    """`1 row`, `0 rows`, `1,204 rows`."""
    return f"{count:,} row" + ("" if count == 1 else "s")
