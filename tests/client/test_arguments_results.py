"""Command-line tool arguments read by the tool's schema, and results shown as tables (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from safedb.client.arguments import ArgumentError, parse_arguments
from safedb.client.results import render_result, tabulate

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "dry": {"type": "boolean"},
        "tags": {"type": "array"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["query=SELECT 1", "limit=5", "dry=true"], {"query": "SELECT 1", "limit": 5, "dry": True}),
        (["query=42"], {"query": "42"}),
        (['tags=["a","b"]', "maybe=null"], {"tags": ["a", "b"], "maybe": None}),
        (["unknown=7", "other=hello", 'quoted="x"'], {"unknown": 7, "other": "hello", "quoted": '"x"'}),
        (["query:=42"], {"query": 42}),
        (['{"query": "SELECT 2", "limit": 1}'], {"query": "SELECT 2", "limit": 1}),
        (["query=a=b"], {"query": "a=b"}),
    ],
)
def test_arguments(words: list[str], expected: dict[str, Any]) -> None:
    assert parse_arguments(words, SCHEMA) == expected


@pytest.mark.parametrize(
    ("words", "problem"), [(["limit=five"], "limit"), (["noequals"], "key=value"), (["[1]"], "key=value")]
)
def test_bad_arguments(words: list[str], problem: str) -> None:
    with pytest.raises(ArgumentError, match=problem):
        parse_arguments(words, SCHEMA)


def test_columns_and_rows_become_a_table_with_the_other_values_below() -> None:
    table = tabulate({"columns": ["id", "name"], "rows": [[1, "Ada"], [2, None]], "truncated": False})
    assert table == "id | name\n---+-----\n1  | Ada\n2  | NULL\n(2 rows)\ntruncated: false"


def test_a_list_of_objects_becomes_a_table() -> None:
    table = tabulate({"tables": [{"name": "users", "type": "table"}, {"name": "v", "type": "view"}]})
    assert table is not None
    assert table.splitlines()[0] == "name  | type"


def test_non_tabular_results_show_their_text_cleaned() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="done \x1b[2J")], structured_content={"ok": True})
    assert render_result(result) == "done "
    error = CallToolResult(content=[TextContent(type="text", text="bad")], is_error=True)
    assert render_result(error) == "Error from the tool:\nbad"
