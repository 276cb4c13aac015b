"""The deny list: statements that no approval can let through."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from safedb.errors import DeniedByPolicy
from safedb.sql.classification import ChangeKind, Classification, ObjectType

_IN_MEMORY_NAMES = frozenset({"", ":memory:"})
# SQLite functions that hand out or take in addresses of native code: `fts3_tokenizer(name, pointer)` makes
# SQLite call whatever the pointer points to, as dangerous as loading an extension.
_NATIVE_POINTER_FUNCTIONS = frozenset({"fts3_tokenizer"})
# In a `file:` URI, text that SQLite and Python's URL parsing read differently: control characters (Python
# drops tabs and newlines, SQLite keeps them) and `%00` or other escaped control characters (SQLite ends
# the name or value at `%00`, Python reads on). Either could make a file on disk look like an in-memory
# database here.
_AMBIGUOUS_URI_TEXT = re.compile(r"[\x00-\x1f\x7f]|%(?:[01][0-9a-fA-F]|7[fF])")


@dataclass(frozen=True)
class DenyList:
    """What is refused outright. By default: extension loading, and any file outside `allowed_paths`."""

    allow_extension_loading: bool = False
    allowed_paths: tuple[Path, ...] = field(default_factory=tuple)

    def check(self, classification: Classification) -> None:
        """Raise `DeniedByPolicy` when the statement is on the deny list."""
        for change in classification.changes:
            if change.kind is ChangeKind.LOAD_EXTENSION and not self.allow_extension_loading:
                raise DeniedByPolicy("Loading SQLite extensions is not allowed on this server. Nothing was run.")
            if change.target.type is ObjectType.FUNCTION and change.target.name.lower() in _NATIVE_POINTER_FUNCTIONS:
                raise DeniedByPolicy(
                    f"{change.target.name}() passes native code addresses, which can crash the server or run "
                    "arbitrary code; it is never allowed. Nothing was run."
                )
            if change.target.type is not ObjectType.FILE:
                continue
            verb = "VACUUM INTO" if change.kind is ChangeKind.VACUUM else "ATTACH"
            if _is_ambiguous_uri(change.target.name):
                raise DeniedByPolicy(
                    f"{verb} {change.target.name!r} is not allowed: the URI holds control characters, escaped "
                    "ones (such as %00) or brackets outside an address, which SQLite reads differently, so SafeDB "
                    "cannot tell which file it opens. Nothing was run."
                )
            if not self._file_allowed(change.target.name):
                raise DeniedByPolicy(
                    f"{verb} {change.target.name!r} is not allowed: the file is outside the paths this server "
                    "may write to (--allow-path, or a target's allowed_paths in the configuration file). Nothing "
                    "was run."
                )

    def _file_allowed(self, name: str) -> bool:
        path = file_path(name)
        if path is None:
            return name in _IN_MEMORY_NAMES or _is_memory_uri(name)
        return any(path.is_relative_to(os.path.realpath(root)) for root in self.allowed_paths)


def file_path(name: str) -> Path | None:
    """The file SQLite would open for a file name, or None for in-memory and unreadable names."""
    if name in _IN_MEMORY_NAMES or name == "?" or _is_memory_uri(name):
        return None
    if name.startswith("file:"):
        name = unquote(urlsplit(name).path)
    # SQLite reads the name as a C string: a NUL (`%00` in a URI) ends it.
    name = name.partition("\0")[0]
    if not name:
        return None
    # As the operating system will: each symbolic link first, then the `..` after it.
    return Path(os.path.realpath(name))


def _is_ambiguous_uri(name: str) -> bool:
    """A `file:` URI that SQLite and Python read differently (`_AMBIGUOUS_URI_TEXT`), or that Python cannot split at
    all (a `[` it takes for the start of an IPv6 address), so that SafeDB cannot tell which file it opens."""
    if not name.startswith("file:"):
        return False
    try:
        urlsplit(name)
    except ValueError:
        return True
    return _AMBIGUOUS_URI_TEXT.search(name) is not None


def _is_memory_uri(name: str) -> bool:
    """True for a `file:` URI that SQLite opens in memory: its path is `:memory:`, or the last `mode`
    parameter (the one SQLite applies) is `memory`."""
    if not name.startswith("file:"):
        return False
    parts = urlsplit(name)
    modes = [value for key, value in parse_qsl(parts.query, keep_blank_values=True) if key == "mode"]
    return parts.path == ":memory:" or (bool(modes) and modes[-1] == "memory")
