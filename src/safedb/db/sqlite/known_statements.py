"""Remember how each statement text classified, so a repeated statement is not compiled again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from safedb.sql.classification import Classification


@dataclass
class _Entry:
    schema_version: int
    classification: Classification
    long_running: bool = False


class KnownStatements:
    """Classifications by statement text, each valid only at the schema version it was made under.

    A classification depends only on the statement and the schema, and any schema change (a table,
    view, trigger or index created, altered or dropped) bumps SQLite's schema version, so an entry
    from before it is never used again. Besides, an approved statement runs under an authorizer that
    lets through only the actions its classification listed, checked by SQLite as it runs. Each entry
    also remembers whether the read once ran too long to run inline (see `SqliteDatabase.read`). The
    least recently used entry goes first once `size` are held; statements longer than
    `MAX_STATEMENT_CHARS` are not kept, so the memory the cache can hold stays small.
    """

    MAX_STATEMENT_CHARS = 10_000

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sql: str, schema_version: int) -> Classification | None:
        with self._lock:
            entry = self._entries.get(sql)
            if entry is None or entry.schema_version != schema_version:
                return None
            self._entries.move_to_end(sql)
            return entry.classification

    def add(self, sql: str, schema_version: int, classification: Classification) -> None:
        if len(sql) > self.MAX_STATEMENT_CHARS:
            return
        with self._lock:
            self._entries[sql] = _Entry(schema_version, classification)
            self._entries.move_to_end(sql)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def mark_long_running(self, sql: str) -> None:
        with self._lock:
            if (entry := self._entries.get(sql)) is not None:
                entry.long_running = True

    def long_running(self, sql: str) -> bool:
        entry = self._entries.get(sql)
        return entry is not None and entry.long_running
