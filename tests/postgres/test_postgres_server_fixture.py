"""The test server helper: where the binaries come from, and what happens when they are missing."""

from __future__ import annotations

import pytest

from tests import postgres_server
from tests.conftest_postgres import REQUIRE_ALL, missing_postgres
from tests.postgres.conftest import PgDatabase


def test_missing_binaries_skip_locally_and_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_server, "find_binaries", lambda: None)
    with pytest.raises(postgres_server.PostgresUnavailable) as caught, postgres_server.postgres_server():
        pass
    monkeypatch.delenv(REQUIRE_ALL, raising=False)
    with pytest.raises(pytest.skip.Exception):
        missing_postgres(caught.value)
    monkeypatch.setenv(REQUIRE_ALL, "1")
    with pytest.raises(pytest.fail.Exception, match="required"):
        missing_postgres(caught.value)


def test_the_server_listens_on_loopback_only(pg: PgDatabase) -> None:
    rows = pg.rows("SELECT current_setting('listen_addresses'), current_setting('unix_socket_directories')")
    assert rows[0][0] == "127.0.0.1"
    assert rows[0][1] == str(pg.server.directory)
