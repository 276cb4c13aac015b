"""Reading the JSON and TOML files a person points the client at: server configs and answer rules.

Whatever such a file holds (another encoding, binary junk, nesting deeper than the parser's recursion
allows), reading it ends in its data or in one `DataFileError` that names the file and the problem.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any


class DataFileError(ValueError):
    """The file cannot be read or parsed; the message names the file and says why."""


def read_data_file(path: Path, description: str, *, toml: bool = False) -> Any:
    """The data in a UTF-8 JSON file (TOML with `toml=True`); `description` names the file in messages.

    Raises:
        DataFileError: unreadable, not UTF-8, not valid JSON/TOML, or nested too deeply to parse.
    """
    syntax = "TOML" if toml else "JSON"
    try:
        text = path.read_text(encoding="utf-8")
        return tomllib.loads(text) if toml else json.loads(text)
    except OSError as exc:
        raise DataFileError(f"Cannot read {description} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DataFileError(f"The {description} {path} is not UTF-8 text (byte {exc.start} cannot be read)") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataFileError(f"The {description} {path} is not valid {syntax}: {exc}") from None
    except RecursionError:
        raise DataFileError(f"The {description} {path} nests its {syntax} too deeply to be read") from None
