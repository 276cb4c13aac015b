"""Command-line tool arguments read by the tool's schema, and results shown as tables (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent, Tool

from safedb.client.arguments import ArgumentError, parse_arguments
from safedb.client.results import describe_tools, render_result, tabulate

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
    ("words", "problem"),
    [
        (["limit=five"], "limit"),
        (["noequals"], "key=value"),
        (["[1]"], "key=value"),
        (["limit=" + "9" * 5000], "limit"),  # more digits than Python converts
        (["limit:=" + "9" * 5000], "limit"),
        # The later one won unseen.
        (["query=SELECT 1", "query=DROP TABLE t"], "'query' is given more than once"),
        (["limit=1", "limit:=2"], "'limit' is given more than once"),
    ],
)
def test_bad_arguments(words: list[str], problem: str) -> None:
    with pytest.raises(ArgumentError, match=problem):
        parse_arguments(words, SCHEMA)


def test_a_tool_schema_of_the_wrong_shape_reads_the_arguments_untyped() -> None:
    """A server's inputSchema may be anything: `properties` as a list is no reason to fail."""
    assert parse_arguments(["a=1", "b=x"], {"type": "object", "properties": ["a", "b"]}) == {"a": 1, "b": "x"}


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


def test_tools_with_schemas_of_the_wrong_shape_are_still_listed() -> None:
    tools = [
        Tool(name="odd_required", input_schema={"type": "object", "properties": {"a": {}}, "required": 5}),
        Tool(name="listed_properties", input_schema={"type": "object", "properties": ["a", "b"]}),
        Tool(name="plain", input_schema={"type": "object", "properties": {"a": {}}, "required": ["a"]}),
    ]
    assert describe_tools(tools).splitlines() == ["odd_required [a=…]", "listed_properties", "plain a=…"]


def test_a_tool_s_wrapped_description_is_shown_whole_to_its_first_paragraph() -> None:
    """Its first line alone ended mid-sentence: `... A statement that`."""
    description = "Run one statement. Reads run at once. A statement that\ncould change anything is asked.\n\nMore."
    tool = Tool(name="run", description=description, input_schema={"type": "object"})
    assert describe_tools([tool]).splitlines() == [
        "run",
        "    Run one statement. Reads run at once. A statement that could change anything is asked.",
    ]
