"""Reading the JSON and TOML files a person points the client at: server configs and answer rules.

Server configs are read as the hosts that write them read them: VS Code's `mcp.json` is JSON with comments
and trailing commas (JSONC), which the JSON5 parser takes too.

Whatever such a file holds (another encoding, binary junk, nesting deeper than the parser's recursion
allows), reading it ends in its data or in one `DataFileError` that names the file and the problem.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import json5


class DataFileError(ValueError):
    """The file cannot be read or parsed; the message names the file and says why."""


def read_data_file(path: Path, description: str, *, toml: bool = False, comments: bool = False) -> Any:
    """The data in a UTF-8 JSON file (TOML with `toml=True`; JSON with comments and trailing commas with
    `comments=True`); `description` names the file in messages.

    Raises:
        DataFileError: unreadable, not UTF-8, not valid JSON/TOML, or nested too deeply to parse.
    """
    syntax = "TOML" if toml else "JSON"
    try:
        text = path.read_text(encoding="utf-8")
        if toml:
            return tomllib.loads(text)
        return json5.loads(text) if comments else json.loads(text)
    except OSError as exc:
        raise DataFileError(f"Cannot read {description} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DataFileError(f"The {description} {path} is not UTF-8 text (byte {exc.start} cannot be read)") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:  # json5 raises ValueError, as json's own error is
        raise DataFileError(f"The {description} {path} is not valid {syntax}: {exc}") from None
    except RecursionError:
        raise DataFileError(f"The {description} {path} nests its {syntax} too deeply to be read") from None
