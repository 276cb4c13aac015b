"""Tool results for people: tabular structured content as a table, text as text, the rest summarised."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_types import CallToolResult, ErrorData, TextContent, Tool

from safedb.client.arguments import schema_properties
from safedb.client.sanitize import clean_text, named_empty_lines

_CELL_WIDTH = 60


def render_result(result: CallToolResult) -> str:
    """The result as terminal text (server text cleaned of control characters, long runs of empty lines named)."""
    structured = result.structured_content
    table = tabulate(structured) if isinstance(structured, Mapping) else None
    lines = ["Error from the tool:"] if result.is_error else []
    if table is not None:
        lines.append(table)
    else:
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        lines.extend(named_empty_lines(clean_text(text)) for text in texts)
        lines.extend(f"[{block.type} content]" for block in result.content if not isinstance(block, TextContent))
        if not result.content and structured is not None:
            lines.append(clean_text(json.dumps(structured, indent=2, ensure_ascii=False)))
    return "\n".join(lines) if lines else "(empty result)"


def result_json(result: CallToolResult) -> dict[str, Any]:
    """The result as JSON for scripts, in the protocol's own field names."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def render_error(error: ErrorData) -> str:
    """A JSON-RPC error the server answered a call with (the call reached it, but it refused)."""
    return f"Error from the server: {named_empty_lines(clean_text(error.message))}"


def error_json(error: ErrorData) -> dict[str, Any]:
    """The error for scripts, as `{"error": {"code": ..., "message": ...}}`."""
    return {"error": error.model_dump(mode="json", by_alias=True, exclude_none=True)}


def tabulate(structured: Mapping[str, Any]) -> str | None:
    """A table for `{"columns": [...], "rows": [[...]]}` or for an object holding a list of objects, with the
    object's other plain values listed below it; None when nothing in it is tabular."""
    columns = structured.get("columns")
    rows = structured.get("rows")
    used: set[str] = set()
    table: str | None = None
    if isinstance(columns, list) and _is_str_list(columns) and isinstance(rows, list) and _all_lists(rows):
        table = format_table(columns, rows)
        used = {"columns", "rows"}
    else:
        for key, value in structured.items():
            if isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
                keys = list(dict.fromkeys(name for item in value for name in item))
                table = format_table(keys, [[item.get(name) for name in keys] for item in value])
                used = {key}
                break
    if table is None:
        return None
    extras = [
        f"{clean_text(str(key), multiline=False)}: {_cell(value)}"
        for key, value in structured.items()
        if key not in used and not isinstance(value, list | Mapping)
    ]
    return "\n".join([table, *extras])


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    header = [_cell(column) for column in columns]
    body = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header[i]), *(len(row[i]) for row in body if i < len(row))]) for i in range(len(header))]
    lines = [" | ".join(text.ljust(width) for text, width in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * width for width in widths))
    lines.extend(" | ".join(text.ljust(width) for text, width in zip(row, widths, strict=False)) for row in body)
    count = len(rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(line.rstrip() for line in lines)


def describe_tools(tools: Sequence[Tool]) -> str:
    if not tools:
        return "The server offers no tools."
    lines = []
    for tool in tools:
        # A server's schema may be of any shape: what is not a list of required names is left out.
        names = [str(name) for name in schema_properties(tool.input_schema)]
        required = (tool.input_schema or {}).get("required")
        needed = {str(name) for name in required} if isinstance(required, list) else set()
        arguments = " ".join(f"{name}=…" if name in needed else f"[{name}=…]" for name in names)
        lines.append(clean_text(f"{tool.name} {arguments}".rstrip(), multiline=False))
        # The first paragraph, whole: descriptions are often wrapped, and their first line ends mid-sentence.
        paragraph = (tool.description or tool.title or "").strip().split("\n\n")[0]
        summary = clean_text(" ".join(paragraph.split()), multiline=False)
        lines.extend(textwrap.wrap(summary, width=100, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False)
    text = clean_text(text, multiline=False)
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


def _is_str_list(value: list[Any]) -> bool:
    return all(isinstance(item, str) for item in value)


def _all_lists(value: list[Any]) -> bool:
    return all(isinstance(item, list) for item in value)
