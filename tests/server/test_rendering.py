"""The text form of a result, which clients that ignore structured content show."""

from __future__ import annotations

import base64

import pytest

from safedb.server.rendering import format_table


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 8, 1000])
def test_a_blob_shows_its_own_size(size: int) -> None:
    encoded = base64.b64encode(bytes(size)).decode("ascii")

    table = format_table(["data"], [[{"base64": encoded}]])

    assert table.splitlines()[-1] == f"<blob {size} bytes>"
