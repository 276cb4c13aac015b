"""Which MCP server to talk to: an HTTP(S) URL, a command speaking stdio, or an entry of an `mcpServers` file.

Config files use the format Claude Desktop, Cursor and mcp-use read (`{"mcpServers": {NAME: {...}}}`),
or VS Code's (`{"servers": {NAME: {...}}}`). An entry has either `command` (+ `args`, `env`, `cwd`)
or `url` (+ `headers`; `type` http/streamable-http when given). The variables VS Code and Cursor substitute
(`${env:NAME}`, `${input:ID}`...) are substituted in those values (see `config_variables`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from safedb.client.config_variables import AskInput, ConfigVariableError, ConfigVariables
from safedb.client.data_files import DataFileError, read_data_file
from safedb.client.sanitize import clean_text
from safedb.client.words import split_words


class TargetError(ValueError):
    """The server to connect to is not described well enough to connect."""


@dataclass(frozen=True)
class HttpTarget:
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return clean_text(self.url, multiline=False)


@dataclass(frozen=True)
class StdioTarget:
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def describe(self) -> str:
        """The command line, as shown wherever the client names the server: a configuration file is not trusted
        to keep escape sequences out of its command and arguments."""
        return clean_text(shlex.join([self.command, *self.args]), multiline=False)


Target = HttpTarget | StdioTarget

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamablehttp", "streamable_http"})


def http_target(url: str, headers: Mapping[str, str] | None = None) -> HttpTarget:
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number from 0 to 65535 raises here, not at connect time
    except ValueError as exc:
        raise TargetError(f"{url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"{url!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise TargetError(f"{url!r} has no host")
    if not url.isprintable():
        raise TargetError(f"{url!r} contains control characters")
    headers = dict(headers or {})
    for name, value in headers.items():
        _check_header(name, value)
    return HttpTarget(url, headers)


def _check_header(name: str, value: str) -> None:
    # HTTP sends header names as tokens and values as ASCII text; anything else would fail inside the
    # HTTP library mid-connect (or, for a line break, smuggle in another header).
    if not _HEADER_NAME.fullmatch(name):
        raise TargetError(f"Header name {name!r} may only contain ASCII letters, digits and !#$%&'*+-.^_`|~")
    if not _HEADER_VALUE.fullmatch(value):
        # The value is not repeated: it is often a credential.
        raise TargetError(f"The value of header {name!r} may only contain printable ASCII characters")


def stdio_target(command_line: str) -> StdioTarget:
    try:
        words = split_words(command_line)
    except ValueError as exc:
        raise TargetError(f"Cannot split the command {command_line!r}: {exc}") from None
    if not words:
        raise TargetError("--stdio needs a command")
    return StdioTarget(words[0], tuple(words[1:]))


def config_target(
    path: Path,
    name: str | None,
    *,
    inputs: Mapping[str, str] | None = None,
    ask: AskInput | None = None,
    warn: Callable[[str], None] = lambda message: None,
) -> Target:
    """The server `name` from an `mcpServers` (or VS Code `servers`) JSON file, its variables substituted; with no
    `name`, the file's only server.

    `inputs` are values for `${input:ID}` given up front; others are asked through `ask` (an error without it).
    `warn` hears of environment variables that are not set.
    """
    try:
        data = read_data_file(path, "config file", comments=True)
    except DataFileError as exc:
        raise TargetError(str(exc)) from None
    servers = _servers(data)
    if servers is None:
        raise TargetError(f"{path} has no 'mcpServers' (or 'servers') object")
    known = ", ".join(sorted(servers)) or "none"
    if name is None:
        if len(servers) != 1:
            raise TargetError(f"{path} has {len(servers)} servers: name one with --server NAME (it has: {known})")
        (name,) = servers
    if name not in servers:
        raise TargetError(f"{path} has no server named {name!r} (it has: {known})")
    shell_style = isinstance(data.get("mcpServers"), Mapping)  # `servers` is VS Code's
    variables = ConfigVariables(path, data.get("inputs"), dict(inputs or {}), ask, warn, shell_style=shell_style)
    if isinstance(servers[name], Mapping) and servers[name].get("disabled") is True:
        warn(f"Server {name!r} is marked disabled in {path}; connecting to it all the same, as asked.")
    try:
        return _entry_target(name, servers[name], variables.substitute)
    except ConfigVariableError as exc:
        raise TargetError(f"Server {name!r}: {exc}") from None


def _servers(data: Any) -> Mapping[str, Any] | None:
    if not isinstance(data, Mapping):
        return None
    for key in ("mcpServers", "servers"):
        if isinstance(data.get(key), Mapping):
            return data[key]  # type: ignore[no-any-return]
    return None


def _entry_target(name: str, entry: Any, substitute: Callable[[str], str]) -> Target:
    """The target an entry describes; `substitute` resolves variables in the values VS Code and Cursor resolve
    them in (command, args, env, cwd, url, headers), once their types are checked."""
    if not isinstance(entry, Mapping):
        raise TargetError(f"Server {name!r} is not a JSON object")
    kind = str(entry.get("type", "")).lower()
    if "url" in entry and "command" in entry:
        raise TargetError(
            f"Server {name!r} has both a 'url' and a 'command': give the URL of an HTTP server or the command of a "
            "stdio one"
        )
    if "url" in entry:
        if kind == "stdio":
            raise TargetError(f"Server {name!r} has a 'url' but type 'stdio': a stdio server is given by 'command'")
        if kind and kind not in _HTTP_TYPES:
            raise TargetError(f"Server {name!r} has type {kind!r}; only Streamable HTTP and stdio are supported")
        headers = _string_map(entry.get("headers"), name, "headers", substitute)
        url = entry["url"]
        try:
            return http_target(substitute(url) if isinstance(url, str) else str(url), headers)
        except TargetError as exc:
            raise TargetError(f"Server {name!r}: {exc}") from None
    if "command" in entry:
        command, args, cwd = entry["command"], entry.get("args", []), entry.get("cwd")
        if not isinstance(command, str) or not command:
            what = "is empty" if command == "" else "must be a string"
            raise TargetError(f"Server {name!r}: 'command' {what} (the program; its arguments go in 'args')")
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise TargetError(f"Server {name!r}: 'args' must be a list of strings")
        if cwd is not None and not isinstance(cwd, str):
            raise TargetError(f"Server {name!r}: 'cwd' must be a string")
        program = substitute(command)
        if not program:
            raise TargetError(f"Server {name!r}: 'command' is empty once its variables are substituted")
        arguments = tuple(substitute(arg) for arg in args)  # in the order of the entry: inputs are asked so
        env = _string_map(entry.get("env"), name, "env", substitute) or None
        directory = substitute(cwd) if cwd is not None else None
        # The operating system takes none of these with a NUL character in it: starting the server would fail.
        texts = [program, *arguments, *(env or {}), *(env or {}).values(), directory or ""]
        if any("\x00" in text for text in texts):
            raise TargetError(f"Server {name!r}: its command, args, env or cwd contain a NUL character (\\u0000)")
        return StdioTarget(program, arguments, env, directory)
    raise TargetError(f"Server {name!r} has neither 'url' nor 'command'")


def _string_map(value: Any, name: str, key: str, substitute: Callable[[str], str]) -> dict[str, str]:
    """An object of strings, with variables substituted; numbers and true/false are taken as their JSON text, as hosts
    written in Node take them."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TargetError(f"Server {name!r}: {key!r} must be an object of strings")
    strings = {}
    for item, given in value.items():
        if not isinstance(given, str | int | float):  # bool is an int
            raise TargetError(f"Server {name!r}: {key!r} must be an object of strings (the value of {item!r} is not)")
        strings[str(item)] = substitute(given) if isinstance(given, str) else json.dumps(given)
    return strings
