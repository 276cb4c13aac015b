"""Ask SQLite what a statement would do: compile it under a recording authorizer, never run it."""

from __future__ import annotations

import hashlib
import itertools
import re
import sqlite3
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from safedb.db.sqlite.connections import quote_identifier, was_stopped
from safedb.db.sqlite.expansion import COPY_LIMIT, Definition, copied_tokens, nesting_depths, view_definition
from safedb.db.sqlite.tokens import MARK, is_keyword, sql_tokens, with_integers_as_zero
from safedb.errors import DeniedByPolicy, EmptyStatement, InvalidStatement, MultipleStatements
from safedb.sql.classification import ChangeKind, Classification, DatabaseObject, ObjectType
from safedb.sql.sqlite_actions import (
    CHECK_CONSTRAINT,
    EXAMINED_OPCODES,
    FTS_OPTIMIZE,
    Action,
    AuthorizerEvent,
    Instruction,
    ProgramCall,
    classify_events,
    is_read_event,
    program_calls,
    writes_in_program,
)
from safedb.sql.structure import functions_in_checks, statement_shape

# Whitespace, SQL comments (an unterminated block comment runs to the end, as in SQLite) and the `;` of empty
# statements, all in one match: stripping them a piece at a time copied the rest of the text each time.
_SQL_SPACE = " \t\n\f\r"
"""What SQLite's tokenizer takes for white space (`str.isspace` and `\\s` take more: a no-break space is part of a
name to SQLite)."""
_LEADING_NOISE = re.compile(rf"(?:[{_SQL_SPACE}]+|;|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")


def leading_keyword(sql: str) -> str | None:
    """The first word of the statement after whitespace, comments and empty statements, upper-cased."""
    noise = _LEADING_NOISE.match(sql)
    word = _WORD.match(sql, noise.end() if noise else 0)
    return word.group(0).upper() if word else None


def without_trailing_empty_statements(sql: str) -> str:
    """`sql` without the empty statements after its end (`SELECT 1;;`), which Python's sqlite3 takes for a
    second statement. Only when the first `;` of that run ends a complete statement by SQLite's own reading
    (not one inside a string, a comment or a trigger's body): then what follows is only `;` and whitespace."""
    body = sql.rstrip(_SQL_SPACE + ";")
    end = sql.find(";", len(body))
    if end < 0 or end == len(sql.rstrip(_SQL_SPACE)) - 1:  # no `;`, or just one: Python takes it as it is
        return sql
    statement = sql[: end + 1]
    try:
        complete = sqlite3.complete_statement(statement)
    except (UnicodeEncodeError, ValueError):  # a lone surrogate or a NUL: refused as an invalid statement later
        return sql
    return statement if complete else sql


@dataclass(frozen=True)
class SchemaFacts:
    """What classifying a statement needs to know of the schema (read again when the schema changes)."""

    shadow_tables: frozenset[str] = frozenset()
    """See `shadow_table_names`."""
    views: Mapping[str, Definition] = field(default_factory=dict)
    """Every view, by lower-cased name."""
    nesting: Mapping[str, int] = field(default_factory=dict)
    """How deeply naming a view, or changing a table with triggers, nests subqueries (`nesting_depths`)."""
    code: frozenset[str] = frozenset()
    """The name of every view and trigger, as SQLite compares names (`_ascii_folded`)."""


def schema_facts(connection: sqlite3.Connection) -> SchemaFacts:
    rows = connection.execute(
        "SELECT type, name, tbl_name, sql FROM main.sqlite_schema WHERE type IN ('view', 'trigger') "
        "UNION ALL SELECT type, name, tbl_name, sql FROM temp.sqlite_schema WHERE type IN ('view', 'trigger')"
    ).fetchall()
    views = {name.lower(): view_definition(sql or "") for kind, name, _, sql in rows if kind == "view"}
    # SQLite compiles a view into each statement that names it, and a table's triggers into each that changes it.
    brought_in: dict[str, list[str]] = {}
    for kind, name, table, sql in rows:
        brought_in.setdefault((name if kind == "view" else table).lower(), []).append(sql or "")
    code = frozenset(_ascii_folded(name) for _, name, _, _ in rows)
    nesting = nesting_depths(brought_in, _generated_columns(connection))
    return SchemaFacts(shadow_table_names(connection), views, nesting, code)


def _generated_columns(connection: sqlite3.Connection) -> dict[str, int]:
    """How many generated columns each table of the main and temp schemas has, by lower-cased name (those with
    none left out). Virtual tables have none, and listing their columns may call their module: left out too."""
    counts: dict[str, int] = {}
    for schema in ("main", "temp"):
        rows = connection.execute(
            f"SELECT m.name, count(*) FROM {schema}.sqlite_schema AS m, pragma_table_xinfo(m.name, '{schema}') AS c "
            "WHERE m.type = 'table' AND m.sql NOT LIKE 'create virtual%' AND c.hidden IN (2, 3) GROUP BY m.name"
        )
        for name, count in rows:
            counts[name.lower()] = counts.get(name.lower(), 0) + count
    return counts


def inspect_statement(connection: sqlite3.Connection, sql: str, schema: SchemaFacts) -> Classification:
    """Classify one statement by compiling it on `connection` (a read-only one) without running it.

    `schema` is what `schema_facts` reads from the database as it is. `connection` is left without an
    authorizer; its owner puts the usual one back.

    The statement is compiled as `EXPLAIN <statement>`, which lists the program instead of running
    it. A statement that already starts with EXPLAIN is compiled as it is. Pragmas that would change
    a setting are refused by the recording authorizer, because SQLite applies some of them while
    compiling.

    Raises:
        EmptyStatement, MultipleStatements, TransactionControl, InvalidStatement; sqlite3.Error when
        the database is locked or the connection's time limit passed.
    """
    if sql.startswith("\ufeff"):
        raise InvalidStatement(
            "The statement starts with a byte order mark (U+FEFF), which SQLite cannot read. Nothing was run; "
            "send it without one."
        )
    sql = without_trailing_empty_statements(sql)
    keyword = leading_keyword(sql)
    if keyword is None and _LEADING_NOISE.fullmatch(sql):
        raise EmptyStatement
    explain_only = keyword == "EXPLAIN"
    if copied_tokens(sql, schema.views) > COPY_LIMIT:
        raise InvalidStatement(
            "SQLite cannot run this statement: it names its WITH queries or views so many times over, nested, "
            f"that SQLite would copy more than {COPY_LIMIT:,} tokens of them while compiling it, which can take "
            "minutes. Nothing was run. Name each WITH query fewer times, or keep its rows in a table."
        )
    events: list[AuthorizerEvent] = []

    def record(code: int, arg1: str | None, arg2: str | None, schema: str | None, source: str | None) -> int:
        event = AuthorizerEvent(code, arg1, arg2, schema, source)
        events.append(event)
        if code == Action.PRAGMA and not is_read_event(event):
            return sqlite3.SQLITE_IGNORE
        return sqlite3.SQLITE_OK

    connection.set_authorizer(record)
    try:
        cursor = connection.execute(sql if explain_only else f"EXPLAIN {sql}")
        try:
            program, program_length = ([], 0) if explain_only else _program(cursor, sql)
        finally:
            # Lets go of the compiled program at once: one refused as too long may take a hundred megabytes of
            # SQLite's memory, and a worker thread's traceback would otherwise keep it until collected.
            cursor.close()
    except sqlite3.ProgrammingError as exc:
        if "one statement at a time" in str(exc):
            raise MultipleStatements from exc
        raise InvalidStatement(f"SQLite cannot run this statement: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        if was_stopped(exc):
            raise  # the connection's session reports it (QueryTimeout or QueryFailed)
        raise InvalidStatement(f"SQLite cannot run this statement: {exc}") from exc
    except ValueError as exc:  # e.g. a NUL character in the text
        raise InvalidStatement(f"SQLite cannot run this statement: {exc}") from exc
    connection.set_authorizer(None)  # what follows is SafeDB's own reading of the catalog
    shape = statement_shape(sql, "sqlite", form=with_integers_as_zero)  # parsed once per form, not per number
    classification = classify_events(
        sql,
        events,
        writes_in_program(program),
        shape,
        explain_only=explain_only,
        shadow_tables=schema.shadow_tables,
        written_tables=_shadow_tables_written(connection, program, schema.shadow_tables),
        calls=program_calls(program) | _check_calls(connection, events) | _long_steps(program),
    )
    # SQLite names a WITH query as the code a read is made in too: the question lists only triggers and views.
    runs = tuple(name for name in classification.runs if _ascii_folded(name) in schema.code)
    classification = replace(classification, runs=runs, program_length=program_length)
    classification = replace(classification, resolved=resolved_names(connection, classification))
    for change in classification.changes:
        if change.kind is ChangeKind.CREATE and change.target.type is ObjectType.VIRTUAL_TABLE:
            _refuse_taking_over_tables(connection, change.target, schema.shadow_tables)
        if change.kind is ChangeKind.CREATE and change.target.type is ObjectType.TABLE:
            _refuse_module_names(connection, change.target.name)
        if change.target == DatabaseObject(ObjectType.FUNCTION, FTS_OPTIMIZE):
            # Its writes, made from inside a function call, are none an approval could cover.
            raise DeniedByPolicy(
                "optimize() merges a full-text index, writing the table's own storage, which SafeDB does not run "
                "from inside a query. Nothing was run; send INSERT INTO <table>(<table>) VALUES ('optimize'), "
                "which does the same and is asked about as a change."
            )
    if shape.renamed_to is not None:
        _refuse_module_names(connection, shape.renamed_to)
    return classification


# The longest program a statement may compile to, per character of its text and at least: a long list of values
# takes an instruction or two per value; subqueries nested and copied into each other many times over (see
# `expansion.subquery_depth`) take millions for a few hundred characters, each one a Python object here.
_PROGRAM_STEPS_PER_CHARACTER = 4
_PROGRAM_STEPS_AT_LEAST = 200_000


# Opcodes that do a whole B-tree's work, or a virtual table module's, in one step of SQLite's program, where no
# progress handler runs: `count(*)` of a table (Count), `PRAGMA integrity_check` or `quick_check` (IntegrityCk), and
# a virtual table's xFilter or xNext (VFilter), which walks a whole B-tree for `dbstat WHERE aggregate = 1`, or
# gathers every match of a full-text query. Measured on a 670 MB database, on the event loop, every call: 0.1-0.2 s
# for `count(*)`, 0.3-0.4 s for dbstat's aggregate, more the larger the table.
_LONG_STEP_OPCODES = frozenset({"Count", "IntegrityCk", "VFilter"})
LONG_STEP = ProgramCall("a whole B-tree or a virtual table's work in one step")
"""Not a function, but, as one step of unbounded cost, it keeps the statement off the event loop
(`calls_only_bounded_functions`), as `WHOLE_TABLE_STEP` does."""


def _long_steps(program: list[Instruction]) -> frozenset[ProgramCall]:
    long = any(instruction.opcode in _LONG_STEP_OPCODES for instruction in program)
    return frozenset({LONG_STEP}) if long else frozenset()


def _program(cursor: sqlite3.Cursor, sql: str) -> tuple[list[Instruction], int]:
    """The instructions `EXPLAIN` lists whose opcodes SafeDB examines (`EXAMINED_OPCODES`, and `_LONG_STEP_OPCODES`),
    read up to the bound above on the length of the whole program (InvalidStatement past it), and that length."""
    bound = max(_PROGRAM_STEPS_AT_LEAST, _PROGRAM_STEPS_PER_CHARACTER * len(sql))
    program = []
    length = 0
    for row in itertools.islice(cursor, bound + 1):
        length += 1
        if row[1] in EXAMINED_OPCODES or row[1] in _LONG_STEP_OPCODES:
            program.append(Instruction(str(row[1]), int(row[3]), int(row[4]), row[5]))
    if length > bound:
        raise InvalidStatement(
            f"SQLite cannot run this statement: it compiles to a program of more than {bound:,} instructions (its "
            "subqueries copy each other's expressions over and over). Nothing was run. Nest fewer subqueries, or "
            "keep their rows in a table."
        )
    return program, length


def _shadow_tables_written(
    connection: sqlite3.Connection, program: list[Instruction], shadow_tables: frozenset[str]
) -> frozenset[str]:
    """The shadow tables that the statement's own program opens for writing (OpenWrite on their b-tree or an
    index's, in the main schema): a module writes its shadow tables through statements of its own, never
    through the program of the statement that uses it."""
    roots = {p2 for opcode, p2, p3, _ in program if opcode == "OpenWrite" and p3 == 0}
    if not roots or not shadow_tables:
        return frozenset()
    tables = connection.execute(
        f"SELECT tbl_name FROM main.sqlite_schema WHERE rootpage IN ({', '.join('?' for _ in roots)})", tuple(roots)
    )
    return frozenset(name for (name,) in tables if name in shadow_tables)


def _check_calls(connection: sqlite3.Connection, events: list[AuthorizerEvent]) -> frozenset[ProgramCall]:
    """What the CHECK constraints of the tables whose rows the statement writes call. SQLite leaves CHECK
    constraints out of the schema of a database it opened read-only, so an inspector's program never calls
    them: they are read from each table's definition (`CHECK_CONSTRAINT` when it cannot be read)."""
    written = {(event.schema or "main", event.arg1) for event in events if event.code in _ROW_WRITES and event.arg1}
    calls: set[ProgramCall] = set()
    for schema, table in written:
        definition = connection.execute(
            f"SELECT sql FROM {quote_identifier(schema)}.sqlite_schema WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        names = functions_in_checks((definition or ("",))[0] or "")
        calls.update([CHECK_CONSTRAINT] if names is None else map(ProgramCall, names))
    return frozenset(calls)


_ROW_WRITES = frozenset({Action.INSERT, Action.UPDATE})


# The suffixes of the shadow tables that each module keeps for a virtual table, `<virtual table>_<suffix>`: what
# its xShadowName takes, in SQLite's fts3, fts5 and rtree sources. A module not listed is taken to keep none; if
# it did, its writes to them would count as the statement's own, to be asked about, never let through unasked.
_FTS3_SHADOWS = frozenset({"content", "segments", "segdir", "docsize", "stat"})
_RTREE_SHADOWS = frozenset({"node", "parent", "rowid"})
_SHADOW_SUFFIXES_OF_MODULE = {
    "fts3": _FTS3_SHADOWS,
    "fts4": _FTS3_SHADOWS,
    "fts5": frozenset({"config", "content", "data", "docsize", "idx"}),
    "rtree": _RTREE_SHADOWS,
    "rtree_i32": _RTREE_SHADOWS,
    "geopoly": _RTREE_SHADOWS,
}
_SHADOW_SUFFIXES = sorted(frozenset().union(*_SHADOW_SUFFIXES_OF_MODULE.values()))


def _refuse_taking_over_tables(
    connection: sqlite3.Connection, table: DatabaseObject, shadow_tables: frozenset[str]
) -> None:
    """A new virtual table whose module would take an existing table for one of its own (and write to it, or
    drop it with the virtual table) is refused: the person would approve "create virtual table" only. Shadow
    tables already (`shadow_tables`) and virtual tables are left out, as `pragma_table_list` leaves them out of
    its tables (which it cannot list without compiling every view)."""
    names = {_ascii_folded(f"{table.name}_{suffix}") for suffix in _SHADOW_SUFFIXES}
    taken = [
        name
        for (name,) in connection.execute(
            f"SELECT name FROM {quote_identifier(table.schema or 'main')}.sqlite_schema WHERE type = 'view' "
            "OR (type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE %')"
        )
        if _ascii_folded(name) in names and name not in shadow_tables
    ]
    if taken:
        raise DeniedByPolicy(
            f"CREATE VIRTUAL TABLE {table.name} would take the existing {', '.join(taken)} for its module's own "
            "storage (written with every change, and dropped with the virtual table). Nothing was run; choose "
            "another name."
        )


def _refuse_module_names(connection: sqlite3.Connection, name: str) -> None:
    """A table made or renamed to a name that a virtual table's module keeps for a table of its own
    (`reserved_shadow_names`) is refused, as SQLite refuses it in its defensive mode: the module would write to it,
    and drop it with the virtual table."""
    if _ascii_folded(name) in reserved_shadow_names(connection):
        raise DeniedByPolicy(
            f"A table named {name}: the name is kept for a virtual table's own storage "
            "(<virtual table>_<suffix>), which its module writes to and drops with the virtual table. Nothing was run; "
            "choose another name."
        )


_IDENTIFIED = frozenset({ObjectType.TABLE, ObjectType.VIRTUAL_TABLE, ObjectType.INDEX})


# The triggers and views of a name, as `schema_facts` reads them (SQLite compares names folding ASCII only).
_CODE_SQL = (
    "SELECT 'main', type, name, sql FROM main.sqlite_schema WHERE type IN ('view', 'trigger') AND name = ?1 "
    "COLLATE NOCASE UNION ALL SELECT 'temp', type, name, sql FROM temp.sqlite_schema WHERE type IN ('view', "
    "'trigger') AND name = ?1 COLLATE NOCASE ORDER BY 1, 2"
)


def resolved_names(
    connection: sqlite3.Connection, classification: Classification
) -> tuple[tuple[str, str | None], ...]:
    """Each table and index the statement changes, and the one its name means now (`Classification.resolved`):
    `schema.name (root page N)`, the first page of its B-tree, which stays with it when it is renamed. And each
    trigger and view whose code it runs (`Classification.runs`), with a fingerprint of its definition: one dropped
    and made again under the same name with other code (which makes the same authorizer events) is other code."""
    found = [*_resolved_tables(connection, classification)]
    for name in classification.runs:
        rows = connection.execute(_CODE_SQL, (name,)).fetchall()
        versions = [f"{schema}.{code} ({kind}, definition {_fingerprint(sql)})" for schema, kind, code, sql in rows]
        meant = ", ".join(versions)
        found.append((f"the code of {name}", meant or None))
    return tuple(found)


def _fingerprint(definition: str | None) -> str:
    return hashlib.sha256((definition or "").encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _resolved_tables(connection: sqlite3.Connection, classification: Classification) -> list[tuple[str, str | None]]:
    found = []
    for target in dict.fromkeys(change.target for change in classification.changes):
        if target.type not in _IDENTIFIED:
            continue
        schema = target.schema or "main"
        try:
            row = connection.execute(
                f"SELECT rowid, name, rootpage, sql FROM {quote_identifier(schema)}.sqlite_schema "
                "WHERE type IN ('table', 'index') AND name = ? COLLATE NOCASE",
                (target.name,),
            ).fetchone()
        except sqlite3.OperationalError:  # a schema not attached (any more)
            row = None
        meant = None if row is None else f"{schema}.{row[1]} ({_identity(connection, schema, *row)})"
        found.append((f"{schema}.{target.name}", meant))
    return found


def _identity(
    connection: sqlite3.Connection, schema: str, rowid: int, name: str, root_page: int, sql: str | None
) -> str:
    """What tells a table or index apart from one that took its name: its root page. Every virtual table's is 0,
    so one is told apart by its catalog row and the root pages of its module's tables, which a rename keeps."""
    if root_page:
        return f"root page {root_page}"
    kept = _kept_by_module(name, sql or "")
    pages = connection.execute(
        f"SELECT name, rootpage FROM {quote_identifier(schema)}.sqlite_schema WHERE type = 'table' ORDER BY name"
    ).fetchall()
    module_pages = ", ".join(str(page) for table, page in pages if _ascii_folded(table) in kept)
    return f"virtual table, catalog row {rowid}, module's tables at root pages [{module_pages}]"


def schema_version(connection: sqlite3.Connection) -> int:
    """SQLite's schema version of the main database: it changes whenever the schema does."""
    (version,) = connection.execute("PRAGMA schema_version").fetchone()
    return int(version)


def shadow_table_names(connection: sqlite3.Connection) -> frozenset[str]:
    """The shadow tables of the virtual tables (FTS, R-Tree...) in every attached schema: the tables that
    `pragma_table_list` calls `shadow`, read from the schemas' own tables instead, because listing tables
    there compiles every view (seconds, on the event loop, for one nesting subqueries deeply).

    As SQLite reckons them, a table is a shadow table when it is named after a virtual table in any schema,
    an underscore and a suffix that the virtual table's module keeps (`_SHADOW_SUFFIXES_OF_MODULE`), names
    compared without regard to ASCII case."""
    schemas = _schemas(connection)
    if not (kept := reserved_shadow_names(connection, schemas)):
        return frozenset()
    return frozenset(name for name, _ in _tables_of(connection, schemas) if _ascii_folded(name) in kept)


def module_storage_names(connection: sqlite3.Connection) -> frozenset[str]:
    """The shadow tables (`shadow_table_names`) that a virtual table's module may write as it runs: a module writes
    to the tables of its own schema only, and callers compare names without their schema, so a name that is also a
    table's in a schema where no module keeps it is left out. A database attached on a writer, whose FTS table
    `notes` keeps `notes_data`, must not make main's own `notes_data` a module's to write (a foreign key's cascade
    into it would pass for the module's bookkeeping)."""
    kept = {schema: reserved_shadow_names(connection, [schema]) for schema in _schemas(connection)}
    if not any(kept.values()):
        return frozenset()
    tables = [
        (name, _ascii_folded(name) in kept[schema]) for schema in kept for name, _ in _tables_of(connection, [schema])
    ]
    # Compared by name (`_ascii_folded`): one table of the name that no module keeps leaves the name out.
    not_kept = {_ascii_folded(name) for name, is_kept in tables if not is_kept}
    return frozenset(name for name, is_kept in tables if is_kept and _ascii_folded(name) not in not_kept)


def reserved_shadow_names(connection: sqlite3.Connection, schemas: list[str] | None = None) -> frozenset[str]:
    """The names (`_ascii_folded`) that the virtual tables in `schemas` (every attached one by default) keep for
    their modules' shadow tables, `<virtual table>_<suffix>`, whether such a table exists or not: a module writes
    to a table of such a name as its own, and drops it with the virtual table (FTS3 all five of its names)."""
    virtual_tables = _tables_of(connection, schemas or _schemas(connection), "AND sql LIKE 'CREATE VIRTUAL TABLE %'")
    return frozenset(name for table, sql in virtual_tables for name in _kept_by_module(table, sql))


def module_tables(connection: sqlite3.Connection, table: DatabaseObject) -> list[str]:
    """The tables of the virtual table `table`'s schema that its module keeps for it, as named: dropped with it."""
    schema = table.schema or "main"
    row = connection.execute(
        f"SELECT sql FROM {quote_identifier(schema)}.sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE",
        (table.name,),
    ).fetchone()
    kept = _kept_by_module(table.name, row[0] or "") if row is not None else frozenset()
    return sorted(name for name, _ in _tables_of(connection, [schema]) if _ascii_folded(name) in kept)


def _kept_by_module(table: str, definition: str) -> frozenset[str]:
    """The names (`_ascii_folded`) that the module of the virtual table `table`, defined by `definition`, keeps for
    its shadow tables."""
    suffixes = _SHADOW_SUFFIXES_OF_MODULE.get(virtual_table_module(definition) or "", ())
    return frozenset(_ascii_folded(f"{table}_{suffix}") for suffix in suffixes)


def _schemas(connection: sqlite3.Connection) -> list[str]:
    return [name for (name,) in connection.execute("SELECT name FROM pragma_database_list")]


def _tables_of(connection: sqlite3.Connection, schemas: list[str], condition: str = "") -> list[tuple[str, str]]:
    """The name and definition of every table in `schemas` that meets `condition` (more SQL for the WHERE)."""
    return connection.execute(
        " UNION ALL ".join(
            f"SELECT name, sql FROM {quote_identifier(schema)}.sqlite_schema WHERE type = 'table' {condition}"
            for schema in schemas
        )
    ).fetchall()


def virtual_table_module(sql: str) -> str | None:
    """The module (lower-cased) that a virtual table's definition, as sqlite_schema keeps it, names: `CREATE
    VIRTUAL TABLE <name> USING <module>...`. None when the text does not read so."""
    words = list(itertools.islice(sql_tokens(sql), 6))
    if [text for text, _ in words[:3]] != ["create", "virtual", "table"]:
        return None
    # The name may be a string, which has no token of its own.
    using = 4 if len(words) > 4 and is_keyword(words[4], "using") and not is_keyword(words[3], "using") else 3
    if not (len(words) > using + 1 and is_keyword(words[using], "using") and words[using + 1][1] != MARK):
        return None
    return words[using + 1][0]


_ASCII_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _ascii_folded(name: str) -> str:
    """`name` as SQLite compares names: upper-case ASCII letters as lower-case, nothing else changed."""
    return name.translate(_ASCII_FOLD)
