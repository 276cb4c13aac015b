"""Variables in an `mcp.json` server entry, substituted as VS Code and Cursor substitute them.

`${env:NAME}`, `${userHome}`, `${workspaceFolder}` (and `${workspaceFolderBasename}`, `${cwd}`, `${pathSeparator}`,
`${/}`) and VS Code's `${input:ID}`, which asks the person for a value declared in the file's top-level `inputs`
(`{"type": "promptString", "id": ..., "description": ..., "password": true}`). The rules follow VS Code's resolver:
an unset environment variable gives the empty string (as a shell does; here with a warning), a name the resolver
does not know and a nested `${env:${X}}` stay as written, and a value is not resolved again (a password that
contains `${` stays as typed). Variables that need the editor (`${file}`, `${config:...}`, `${command:...}`...)
cannot be resolved here and are an error.

In `mcpServers` files (Claude Code's `.mcp.json` among them), Claude Code's forms too: `${NAME}`, the environment
variable (as written while unset, as Claude Code passes it), and `${NAME:-default}`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_VARIABLE = re.compile(r"\$\{(.*?)\}")
"""VS Code's pattern: the shortest `${...}`."""
_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EDITOR_ONLY = frozenset({
    "file", "fileWorkspaceFolder", "fileWorkspaceFolderBasename", "relativeFile", "relativeFileDirname",
    "fileBasename", "fileBasenameNoExtension", "fileDirname", "fileExtname", "fileDirnameBasename", "lineNumber",
    "columnNumber", "selectedText", "execPath", "execInstallFolder", "defaultBuildTask", "extensionInstallFolder",
    "config", "command",
})  # fmt: skip
"""Variables VS Code resolves from the editor (open file, selection, settings, commands, extensions)."""
_WORKSPACE_FOLDERS = frozenset({".vscode", ".cursor"})
"""Folders whose `mcp.json` belongs to the workspace they are in."""


class ConfigVariableError(ValueError):
    """A variable in a server entry cannot be resolved; the message names it."""


@dataclass(frozen=True)
class PromptInput:
    """One `promptString` of the file's `inputs`."""

    id: str
    description: str
    password: bool = False
    default: str = ""


AskInput = Callable[[PromptInput], str]
"""Asks the person for an input's value (hidden when `password`)."""


@dataclass
class ConfigVariables:
    """Resolves the variables of the server entries of one config file.

    `given` holds values for `${input:ID}` supplied up front (`--input ID=VALUE`); others are asked through `ask`,
    each once, or are an error when there is no one to ask (`ask` None). `warn` is told about unset environment
    variables.
    """

    config_path: Path
    inputs: Any
    """The file's top-level `inputs` as read (checked only where a `${input:ID}` refers to it)."""
    given: Mapping[str, str] = field(default_factory=dict)
    ask: AskInput | None = None
    warn: Callable[[str], None] = lambda message: None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    shell_style: bool = False
    """Also Claude Code's `${NAME}` and `${NAME:-default}` (an `mcpServers` file)."""
    _answers: dict[str, str] = field(default_factory=dict)

    def substitute(self, text: str) -> str:
        """`text` with its variables replaced.

        Raises:
            ConfigVariableError: a variable that names nothing to resolve, or an input that cannot be had.
        """
        return _VARIABLE.sub(lambda found: self._resolve(found[0], found[1]), text)

    def _resolve(self, written: str, variable: str) -> str:
        if "${" in variable:
            return written  # VS Code does not resolve nested variables
        name, has_argument, argument = variable.partition(":")
        if name == "env":
            if not argument:
                raise ConfigVariableError(f"{written} names no environment variable")
            if argument not in self.environ:
                self.warn(f"{written}: the environment variable {argument} is not set; it gives an empty value")
            return self.environ.get(argument, "")
        if name == "input":
            return self._input(written, argument)
        if name in _EDITOR_ONLY:
            raise ConfigVariableError(f"{written} refers to the editor (VS Code), which safedb client is not")
        if name in ("workspaceFolder", "workspaceRoot", "workspaceFolderBasename", "workspaceRootFolderName"):
            if has_argument:
                raise ConfigVariableError(f"{written}: only the one workspace folder is known here, not a named one")
            folder = self.workspace_folder()
            return folder.name if name.endswith(("Basename", "FolderName")) else str(folder)
        shell_variable = self.shell_style and _ENVIRONMENT_NAME.fullmatch(name) is not None
        if has_argument:
            if shell_variable and argument.startswith("-"):  # Claude Code: the default when unset or empty
                return self.environ.get(name) or argument[1:]
            return written
        if name == "userHome":
            return str(Path.home())
        if name == "cwd":
            return os.getcwd()
        if name in ("pathSeparator", "/"):
            return os.sep
        if shell_variable:
            return self.environ.get(name, written)
        return written  # VS Code leaves a variable it does not know as written

    def workspace_folder(self) -> Path:
        """The folder `${workspaceFolder}` names: the one holding the `.vscode` or `.cursor` folder the config file
        is in, as the editor opened it; for a config file elsewhere (a user-wide one), the current directory."""
        folder = self.config_path.resolve().parent
        return folder.parent if folder.name in _WORKSPACE_FOLDERS else Path.cwd()

    def _input(self, written: str, input_id: str) -> str:
        if not input_id:
            raise ConfigVariableError(f"{written} names no input")
        if input_id in self.given:
            return self.given[input_id]
        if input_id not in self._answers:
            declared = self._declared(written, input_id)
            if self.ask is None:
                raise ConfigVariableError(
                    f"{written} needs a value ({declared.description or declared.id}) and there is no terminal to "
                    f"ask for it: pass --input {input_id}=VALUE"
                )
            self._answers[input_id] = self.ask(declared)
        return self._answers[input_id]

    def _declared(self, written: str, input_id: str) -> PromptInput:
        inputs = self.inputs if isinstance(self.inputs, list) else []
        for entry in inputs:
            if isinstance(entry, Mapping) and entry.get("id") == input_id:
                return _prompt_input(written, entry)
        raise ConfigVariableError(f"{written}: the config file's 'inputs' declare no input with the id {input_id!r}")


def _prompt_input(written: str, entry: Mapping[str, Any]) -> PromptInput:
    kind, description, password = entry.get("type"), entry.get("description", ""), entry.get("password", False)
    default = entry.get("default", "")
    if kind != "promptString":
        raise ConfigVariableError(f"{written}: only inputs of type 'promptString' can be asked here, not {kind!r}")
    if not isinstance(description, str) or not isinstance(default, str) or not isinstance(password, bool):
        raise ConfigVariableError(
            f"{written}: the input's 'description' and 'default' must be strings and 'password' true or false"
        )
    return PromptInput(str(entry["id"]), description, password, default)
