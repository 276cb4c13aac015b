"""Fixtures the client tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.servers import feature_server


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The feature server's URL, one server per test module."""
    with feature_server() as url:
        yield url
