"""A virtual table's module reads and writes shadow tables of its own (an FTS table's docs_data, docs_idx...):
the authorizer of a preview or an approved run lets it, for virtual tables made through SafeDB too."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from safedb.db.backend import QueryLimits
from safedb.db.sqlite.backend import SqliteDatabase
from safedb.db.sqlite.inspector import shadow_table_names, virtual_table_module
from safedb.errors import DeniedByPolicy
from safedb.sql.classification import ChangeKind

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[SqliteDatabase, Path]]:
    path = tmp_path / "shadow.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    connection.close()
    database = SqliteDatabase(path, QueryLimits())
    try:
        yield database, path
    finally:
        await database.aclose()


async def approve(database: SqliteDatabase, sql: str) -> int | None:
    """Classify, preview and run `sql` as an approved change; the row count the preview showed."""
    classification = await database.classify(sql)
    impact = await database.preview(classification)
    await database.write(classification, impact.bounds)
    return impact.rows_affected


async def test_a_virtual_table_made_after_the_first_change_can_be_used_and_dropped(
    served: tuple[SqliteDatabase, Path],
) -> None:
    database, path = served
    await approve(database, "INSERT INTO notes (body) VALUES ('before')")  # before there are any shadow tables

    await approve(database, "CREATE VIRTUAL TABLE docs USING fts5(body)")
    await approve(database, "INSERT INTO docs VALUES ('hello world')")
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT body FROM docs WHERE docs MATCH 'hello'").fetchall() == [("hello world",)]
        # Dropping it drops its shadow tables (docs_data, docs_idx...) too: allowed only if they are known by now.
        await approve(database, "DROP TABLE docs")
        assert connection.execute("SELECT name FROM sqlite_schema WHERE name LIKE 'docs%'").fetchall() == []
    finally:
        connection.close()


async def test_the_preview_of_a_virtual_table_change_says_where_its_extra_changes_come_from(
    served: tuple[SqliteDatabase, Path],
) -> None:
    """An FTS insert of one row counts several changes (the module's writes to its shadow tables): the preview
    shows the one row as the statement's own, and does not put the rest down to triggers."""
    database, _ = served
    await approve(database, "CREATE VIRTUAL TABLE docs USING fts5(body)")

    impact = await database.preview(await database.classify("INSERT INTO docs VALUES ('hello world')"))

    (line,) = impact.lines
    assert line.startswith("1 row would be affected (insert)")
    assert "what the virtual table's module writes to its own tables" in line
    assert "triggers" not in line


async def test_a_statement_that_writes_a_shadow_table_itself_is_asked_as_what_it_does(
    served: tuple[SqliteDatabase, Path],
) -> None:
    """Writing an FTS index's own table directly (which corrupts the index) is the statement's own change, shown
    as such, not left out as the module's bookkeeping (with only a trigger's insert elsewhere to show)."""
    database, _ = served
    await approve(database, "CREATE VIRTUAL TABLE docs USING fts5(body)")
    await approve(database, "INSERT INTO docs VALUES ('hello world')")
    await approve(
        database, "CREATE TRIGGER note_it AFTER DELETE ON docs_content BEGIN INSERT INTO notes (body) VALUES ('x'); END"
    )

    classification = await database.classify("DELETE FROM docs_content")

    assert (ChangeKind.DELETE, "docs_content") in {(c.kind, c.target.name) for c in classification.changes}


@pytest.mark.parametrize("module", ["fts3(bio)", "fts4(bio)", "fts5(bio)"])
async def test_a_virtual_table_that_would_take_over_an_existing_table_is_refused(
    served: tuple[SqliteDatabase, Path], module: str
) -> None:
    """FTS3 takes `player_stat` for its own statistics (and drops it with `player`); FTS4 and FTS5 write to
    theirs. Approving "create virtual table player" must not hand them a table of the person's."""
    database, path = served
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE player_stat (id INTEGER PRIMARY KEY, goals INTEGER); INSERT INTO player_stat VALUES (1, 4);"
        "CREATE TABLE player_docsize (id INTEGER PRIMARY KEY); CREATE TABLE player_config (k, v);"
    )
    connection.close()

    with pytest.raises(DeniedByPolicy, match="would take the existing"):
        await database.classify(f"CREATE VIRTUAL TABLE player USING {module}")
    classification = await database.classify(f"CREATE VIRTUAL TABLE players USING {module}")
    assert (ChangeKind.CREATE, "players") in {(c.kind, c.target.name) for c in classification.changes}


# Virtual tables of every module that keeps shadow tables, named in every way SQLite takes a name, in three
# schemas, beside look-alike tables that are not shadow tables (another module's suffix, a non-ASCII case
# difference, a prefix that is not the whole name).
_SHADOW_SCHEMA = """
    CREATE VIRTUAL TABLE docs USING fts5(body);
    CREATE VIRTUAL TABLE "Old Docs" USING FTS4(body);
    CREATE VIRTUAL TABLE 'legacy' /* a string for a name */ USING
        "fts3"(body);
    CREATE VIRTUAL TABLE [boxes] USING rtree(id, x0, x1);
    CREATE VIRTUAL TABLE `ints` USING rtree_i32(id, x0, x1);
    CREATE VIRTUAL TABLE IF NOT EXISTS temp.Scratch USING fts5(body);
    CREATE VIRTUAL TABLE vocab USING fts5vocab(docs, row);
    CREATE VIRTUAL TABLE "Ä" USING fts5(body);
    CREATE TABLE docs_segdir (x);
    CREATE TABLE DOCS_STAT (x);
    CREATE TABLE boxes_data (x);
    CREATE TABLE "ä_data" (x);
    CREATE TABLE do_data (x);
    CREATE TABLE vocab_data (x);
    CREATE TABLE main.scratch_idx (x);
    CREATE TABLE "using" (x);
    CREATE VIEW docs_view AS SELECT * FROM docs;
    CREATE TABLE other.boxes_node (x);
    CREATE VIRTUAL TABLE other."we""ird" USING fts5(body);
    CREATE TABLE other."WE""IRD_config_x" (x);
"""


def test_shadow_tables_are_the_ones_sqlite_lists(tmp_path: Path) -> None:
    """`shadow_table_names` reads the schemas' own tables, not `pragma_table_list` (which compiles every view to
    count its columns); it finds exactly what that pragma calls `shadow`, in every schema."""
    connection = sqlite3.connect(tmp_path / "main.db")
    try:
        connection.execute("ATTACH ? AS other", (str(tmp_path / "other.db"),))
        connection.executescript(_SHADOW_SCHEMA)
        listed = {name for (name,) in connection.execute("SELECT name FROM pragma_table_list WHERE type = 'shadow'")}
        # The pragma's own way: a main table named after a temp virtual table is a shadow table too.
        assert {"docs_data", "Old Docs_segdir", "scratch_idx", "boxes_node"} <= listed
        assert shadow_table_names(connection) == listed
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("definition", "module"),
    [
        ("CREATE VIRTUAL TABLE docs USING fts5(body)", "fts5"),
        ('CREATE VIRTUAL TABLE "a ""using"" b" USING Rtree(id, a, b)', "rtree"),
        ("CREATE VIRTUAL TABLE 'named' USING fts4", "fts4"),
        ("CREATE VIRTUAL TABLE x -- a comment\n USING /* another */ fts3(a)", "fts3"),
        ("CREATE VIRTUAL TABLE 'using' USING fts5(a)", "fts5"),
        ("CREATE VIRTUAL TABLE x USING", None),
        ("CREATE VIRTUAL TABLE x USING (", None),
        ("CREATE TABLE x (a)", None),
        ("", None),
    ],
)
def test_the_module_of_a_virtual_table_is_read_from_its_definition(definition: str, module: str | None) -> None:
    assert virtual_table_module(definition) == module


@pytest.mark.parametrize("module", ["fts3", "fts4"])
async def test_optimize_is_refused_in_a_query_and_runs_when_approved_as_an_insert(
    served: tuple[SqliteDatabase, Path], module: str
) -> None:
    """FTS3/4's `optimize()` merges the index from inside a SELECT. It was taken for a read and then failed on
    the read-only connection ("authorization denied"); now it is refused up front, naming the form that runs."""
    database, path = served
    await approve(database, f"CREATE VIRTUAL TABLE docs USING {module}(body)")
    for word in ("one", "two", "three"):
        await approve(database, f"INSERT INTO docs VALUES ('{word}')")  # one index segment each

    with pytest.raises(DeniedByPolicy, match=r"VALUES \('optimize'\)"):
        await database.classify("SELECT Optimize(docs) FROM docs LIMIT 1")
    await approve(database, "INSERT INTO docs(docs) VALUES ('optimize')")
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT count(*) FROM docs_segdir").fetchone() == (1,)
        assert connection.execute("SELECT count(*) FROM docs WHERE docs MATCH 'two'").fetchone() == (1,)
    finally:
        connection.close()


# Red team: FTS3 drops all five of its names with the virtual table (`DROP TABLE IF EXISTS`), also those it never
# made, so an approved `DROP TABLE docs` took a user table `docs_stat` and its rows, unseen.
@pytest.mark.parametrize("name", ["docs_stat", "DOCS_docsize"])
async def test_a_table_named_as_a_modules_own_is_refused(served: tuple[SqliteDatabase, Path], name: str) -> None:
    database, _ = served
    await approve(database, "CREATE VIRTUAL TABLE docs USING fts3(body)")

    with pytest.raises(DeniedByPolicy, match="kept for a virtual table's own storage"):
        await database.classify(f"CREATE TABLE {name} (id INTEGER)")


async def test_dropping_a_virtual_table_shows_every_table_its_module_drops_with_it(
    served: tuple[SqliteDatabase, Path],
) -> None:
    database, path = served
    await approve(database, "CREATE VIRTUAL TABLE docs USING fts3(body)")
    connection = sqlite3.connect(path)  # made outside SafeDB
    connection.executescript("CREATE TABLE docs_stat (metric TEXT); INSERT INTO docs_stat VALUES ('a'), ('b');")
    connection.close()

    dropped = await database.classify("DROP TABLE docs")
    impact = await database.preview(dropped)

    assert any("drops with it the tables" in line and "docs_stat (2 rows)" in line for line in impact.lines), impact


async def test_a_table_renamed_to_a_name_a_module_keeps_is_refused(served: tuple[SqliteDatabase, Path]) -> None:
    database, _ = served
    await approve(database, "CREATE VIRTUAL TABLE docs USING fts3(body)")

    with pytest.raises(DeniedByPolicy, match="kept for a virtual table's own storage"):
        await database.classify('ALTER TABLE notes RENAME TO "Docs_Stat"')

    renamed = await database.classify("ALTER TABLE notes RENAME TO notes_old")  # another name is a plain rename
    assert [change.kind for change in renamed.changes] == [ChangeKind.RENAME]
