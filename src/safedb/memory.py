"""Handing memory back to the system after the largest pieces of work.

Classifying a statement of hundreds of thousands of characters builds millions of Python objects (its syntax
tree, whose nodes point at their parents, and on SQLite the instructions of its compiled program). The tree's
cycles wait for a full garbage collection, which a server that froze its long-lived objects at start-up (see
`safedb.server.app.serve`) may not run for a long time; and glibc's allocator keeps the pages it freed. Six
reads of 900,000 characters left the server holding some 500 MiB it no longer used, for good.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, which returns the free pages of every heap to the system; None where the C library
    has none (macOS, musl, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def release_memory() -> None:
    """Collect the garbage a large piece of work left, and give the freed pages back to the system. Takes some
    milliseconds: call it after work of `safedb.inline_work.LONG_STATEMENT_CHARS` or more, not after every call."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
