"""Tool results: readable text for people and models, structured content for programs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp_types import CallToolResult, TextContent

from safedb.db.backend import ResultSet, Value, WriteOutcome
from safedb.sql.classification import Classification

_CELL_WIDTH = 40


def text_result(text: str, structured: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )


def error_result(message: str, status: str = "refused") -> CallToolResult:
    return text_result(message, {"status": status, "executed": False, "message": message}, is_error=True)


def rows_result(result: ResultSet, text_rows: int) -> CallToolResult:
    """Every returned row goes in the structured content; the text shows the first `text_rows` as a table."""
    structured = {
        "columns": list(result.columns),
        "rows": [list(row) for row in result.rows],
        "row_count": len(result.rows),
        "truncated": result.truncated,
    }
    shown = result.rows[:text_rows]
    lines = [format_table(result.columns, shown)] if result.columns else []
    count = len(result.rows)
    footer = f"{count} row" + ("" if count == 1 else "s")
    if len(shown) < count:
        footer += f"; the first {len(shown)} are shown here, all {count} are in the structured content"
    if result.truncated:
        footer += "; truncated: more rows matched than the row and size limits allow (truncated=true)"
    lines.append(f"({footer})")
    return text_result("\n".join(lines), structured)


def write_result(classification: Classification, outcome: WriteOutcome, text_rows: int) -> CallToolResult:
    affected = outcome.rows_affected
    text = f"Executed ({classification.summary})."
    if affected is not None:
        text += f" {affected} row" + ("" if affected == 1 else "s") + " affected."
    structured: dict[str, Any] = {
        "status": "executed",
        "executed": True,
        "rows_affected": affected,
        "change": classification.summary,
    }
    if outcome.returned is not None:
        returned = rows_result(outcome.returned, text_rows)
        structured["returned"] = returned.structured_content
        text += "\nReturned rows:\n" + returned.content[0].text  # type: ignore[union-attr]
    return text_result(text, structured)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Value]]) -> str:
    cells = [[_cell(value) for value in row] for row in rows]
    header = [_clip(str(column)) for column in columns]
    widths = [max([len(header[i]), *(len(row[i]) for row in cells)]) for i in range(len(columns))]
    line = "-+-".join("-" * width for width in widths)

    def render(row: Sequence[str]) -> str:
        return " | ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip()

    return "\n".join([render(header), line, *(render(row) for row in cells)])


def _cell(value: Value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        encoded = value["base64"]
        return f"<blob {len(encoded) * 3 // 4 - encoded[-2:].count('=')} bytes>"  # less the padding
    if isinstance(value, str):
        return _clip(value)
    return _clip(json.dumps(value))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"
