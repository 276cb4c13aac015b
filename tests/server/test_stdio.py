"""`safedb serve --transport stdio`, spawned by the SDK's stdio client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.helpers import Responder, rows

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stdio_read_and_approved_write(demo_db: Path, mode: str) -> None:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "safedb", "serve", "--transport", "stdio", "--database", str(demo_db)],
    )
    responder = Responder()
    async with Client(parameters, mode=mode, elicitation_callback=responder) as client:
        read = await client.call_tool("execute_query", {"query": "SELECT count(*) AS n FROM invoices"})
        write = await client.call_tool("execute_query", {"query": "UPDATE invoices SET status = 'void' WHERE id = 3"})
    assert read.structured_content is not None
    assert read.structured_content["rows"] == [[8]]
    assert not write.is_error, write.content
    assert len(responder.asked) == 1
    assert rows(demo_db, "SELECT status FROM invoices WHERE id = 3") == [("void",)]
