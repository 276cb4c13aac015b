"""Phrases that several messages share, so that they read the same everywhere."""

from __future__ import annotations


def count(number: int, noun: str) -> str:
    """`1 table`, `0 tables`, `1,204 views` (nouns whose plural takes an s)."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def rows(number: int) -> str:
    """`1 row`, `0 rows`, `1,204 rows`."""
    return count(number, "row")
