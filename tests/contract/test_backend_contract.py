"""The `Database` protocol, the same tests on SQLite and PostgreSQL: every result is checked against the
database itself, through a connection of the test's own."""

from __future__ import annotations

import anyio
import pytest

from safedb.db.backend import Bounds, QueryLimits
from safedb.errors import (
    EmptyStatement,
    InvalidStatement,
    MultipleStatements,
    QueryFailed,
    QueryTimeout,
    RowCountChanged,
    TransactionControl,
)
from safedb.sql.classification import ChangeKind
from tests.contract.conftest import ITEM_COUNT, SLOW_READ, Backend

pytestmark = pytest.mark.anyio


async def test_read_returns_the_rows(backend: Backend) -> None:
    database = backend.database()
    classification = await database.classify("SELECT id, label, qty FROM items WHERE id <= 3 ORDER BY id")
    assert classification.read_only
    result = await database.read(classification)
    assert result.columns == ("id", "label", "qty")
    assert [list(row) for row in result.rows] == [
        list(row) for row in backend.query("SELECT id, label, qty FROM items WHERE id <= 3 ORDER BY id")
    ]
    assert result.truncated is False


async def test_row_cap_truncates(backend: Backend) -> None:
    database = backend.database(QueryLimits(max_rows=5))
    result = await database.read(await database.classify("SELECT id FROM items ORDER BY id"))
    assert [row[0] for row in result.rows] == [1, 2, 3, 4, 5]
    assert result.truncated is True


async def test_byte_cap_truncates(backend: Backend) -> None:
    database = backend.database(QueryLimits(max_bytes=1024))
    result = await database.read(await database.classify("SELECT id, label || '" + "x" * 200 + "' FROM items"))
    assert 0 < len(result.rows) < ITEM_COUNT
    assert result.truncated is True


async def test_rows_within_caps_are_not_truncated(backend: Backend) -> None:
    database = backend.database(QueryLimits(max_rows=ITEM_COUNT))
    result = await database.read(await database.classify("SELECT id FROM items"))
    assert len(result.rows) == ITEM_COUNT
    assert result.truncated is False


async def test_slow_read_is_stopped_at_the_time_limit(backend: Backend) -> None:
    database = backend.database(QueryLimits(statement_timeout=0.5))
    classification = await database.classify(SLOW_READ)
    assert classification.read_only
    with anyio.fail_after(20), pytest.raises(QueryTimeout, match="time limit"):
        await database.read(classification)
    # The connection is usable again at once.
    result = await database.read(await database.classify("SELECT count(*) FROM items"))
    assert result.rows == ((ITEM_COUNT,),)


@pytest.mark.parametrize(
    ("sql", "kinds"),
    [
        ("SELECT * FROM items", ()),
        ("SELECT label FROM item_labels WHERE label = 'DELETE FROM items'", ()),
        ("DELETE FROM items WHERE id = 1", (ChangeKind.DELETE,)),
        ("UPDATE items SET qty = 0", (ChangeKind.UPDATE,)),
        ("INSERT INTO items (id, label, qty) VALUES (99, 'x', 1)", (ChangeKind.INSERT,)),
        ("DROP TABLE items", (ChangeKind.DROP,)),
        ("CREATE TABLE other (id INTEGER)", (ChangeKind.CREATE,)),
    ],
)
async def test_classify_tells_reads_from_changes(backend: Backend, sql: str, kinds: tuple[ChangeKind, ...]) -> None:
    classification = await backend.database().classify(sql)
    assert classification.read_only is (kinds == ())
    assert set(kinds) <= set(classification.kinds)
    if kinds:
        assert any(target.name in {"items", "other"} for target in classification.touched)


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("", EmptyStatement),
        ("  -- only a comment", EmptyStatement),
        ("SELECT 1; DELETE FROM items", MultipleStatements),
        ("BEGIN", TransactionControl),
        ("COMMIT", TransactionControl),
        ("SELEC * FROM items", InvalidStatement),
    ],
)
async def test_classify_refuses(backend: Backend, sql: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        await backend.database().classify(sql)
    assert backend.query("SELECT count(*) FROM items") == [(ITEM_COUNT,)]


async def test_approved_write_runs_and_reports_rows(backend: Backend) -> None:
    database = backend.database()
    outcome = await database.write(await database.classify("DELETE FROM items WHERE id <= 3"))
    assert outcome.rows_affected == 3
    assert backend.query("SELECT count(*) FROM items") == [(ITEM_COUNT - 3,)]


async def test_returning_rows_come_back(backend: Backend) -> None:
    database = backend.database()
    outcome = await database.write(
        await database.classify("UPDATE items SET qty = 100 WHERE id IN (4, 5) RETURNING id")
    )
    assert outcome.rows_affected == 2
    assert outcome.returned is not None
    assert sorted(row[0] for row in outcome.returned.rows) == [4, 5]
    assert backend.query("SELECT id FROM items WHERE qty = 100 ORDER BY id") == [(4,), (5,)]


async def test_a_schema_change_returns_no_rows(backend: Backend) -> None:
    """SQLite checks the existing rows against a new column's CHECK with a query of its own, whose column
    the statement seems to return."""
    database = backend.database()
    outcome = await database.write(await database.classify("ALTER TABLE items ADD COLUMN note TEXT CHECK (note <> '')"))
    assert outcome.returned is None


@pytest.mark.parametrize(
    "sql", ["UPDATE items SET qty = 0 WHERE id > 27", "DELETE FROM items WHERE id > 27 RETURNING id, label"]
)
async def test_a_write_that_affects_other_than_the_approved_rows_rolls_back(backend: Backend, sql: str) -> None:
    """The person saw 2 rows in the preview; by the time the statement runs, 3 match."""
    database = backend.database()
    before = backend.query("SELECT id, label, qty FROM items ORDER BY id")
    approved = await database.classify(sql)
    with pytest.raises(RowCountChanged, match="affected 3 rows, but was approved for the 2 rows"):
        await database.write(approved, Bounds(rows=2))
    assert backend.query("SELECT id, label, qty FROM items ORDER BY id") == before
    outcome = await database.write(approved, Bounds(rows=3))
    assert outcome.rows_affected == 3
    assert backend.query("SELECT count(*) FROM items WHERE id > 27 AND qty <> 0") == [(0,)]


async def test_failing_write_rolls_back_every_row(backend: Backend) -> None:
    """Rows 10..30 could take `qty - 10`, rows 1..9 break the CHECK: nothing may change."""
    database = backend.database()
    before = backend.query("SELECT id, qty FROM items ORDER BY id")
    with pytest.raises(QueryFailed):
        await database.write(await database.classify("UPDATE items SET qty = qty - 10"))
    assert backend.query("SELECT id, qty FROM items ORDER BY id") == before
    # The writer is healthy afterwards.
    outcome = await database.write(await database.classify("UPDATE items SET qty = qty + 1 WHERE id = 1"))
    assert outcome.rows_affected == 1


async def test_preview_counts_rows_without_changing_them(backend: Backend) -> None:
    database = backend.database()
    impact = await database.preview(await database.classify("DELETE FROM items WHERE id > 20"))
    assert impact.rows_affected == ITEM_COUNT - 20
    assert any("10 rows" in line for line in impact.lines), impact.lines
    assert backend.query("SELECT count(*) FROM items") == [(ITEM_COUNT,)]


async def test_preview_of_drop_table_says_what_is_lost(backend: Backend) -> None:
    database = backend.database()
    impact = await database.preview(await database.classify("DROP TABLE items"))
    assert any(f"{ITEM_COUNT} rows" in line for line in impact.lines), impact.lines
    assert backend.query("SELECT count(*) FROM items") == [(ITEM_COUNT,)]


async def test_list_and_describe_tables(backend: Backend) -> None:
    database = backend.database()
    tables = {table.name: table.type for table in await database.list_tables()}
    assert tables == {"items": "table", "item_labels": "view"}
    described = await database.describe_table("items")
    assert described is not None
    assert [column.name for column in described.columns] == ["id", "label", "qty"]
    assert [column.primary_key for column in described.columns] == [True, False, False]
    assert described.columns[1].nullable is False
    assert described.row_count == ITEM_COUNT
    view = await database.describe_table("item_labels")
    assert view is not None
    assert view.type == "view"
    assert view.sql is not None
    assert "items" in view.sql
    assert await database.describe_table("items; DROP TABLE items") is None
    assert backend.query("SELECT count(*) FROM items") == [(ITEM_COUNT,)]


async def test_reads_do_not_wait_for_each_other(backend: Backend) -> None:
    """A slow read holds one connection; other reads still answer at once."""
    database = backend.database(QueryLimits(statement_timeout=3))
    slow = await database.classify(SLOW_READ)
    fast = await database.classify("SELECT count(*) FROM items")
    outcomes: list[str] = []

    async def run_slow() -> None:
        with pytest.raises(QueryTimeout):
            await database.read(slow)
        outcomes.append("slow")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(run_slow)
            await anyio.sleep(0.2)
            with anyio.fail_after(2):
                result = await database.read(fast)
            outcomes.append("fast")
    assert result.rows == ((ITEM_COUNT,),)
    assert outcomes == ["fast", "slow"]
