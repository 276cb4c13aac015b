"""SQLite's own view of a statement: authorizer events and bytecode, turned into a `Classification`.

The authorizer (`sqlite3.Connection.set_authorizer`) is called while SQLite compiles a statement,
once for every table, column, function, pragma and schema object the statement (including the
triggers and views it reaches) would use. The compiled program (`EXPLAIN`) shows the rest, such as
`VACUUM`, which has no authorizer action. Nothing here touches a connection: `safedb.db.sqlite`
collects the events; this module decides what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from safedb.errors import DeniedByPolicy, TemporaryObject, TransactionControl
from safedb.sql.classification import Change, ChangeKind, Classification, DatabaseObject, ObjectType
from safedb.sql.structure import StatementShape


class Action(IntEnum):
    """SQLite authorizer action codes (sqlite3.h)."""

    CREATE_INDEX = 1
    CREATE_TABLE = 2
    CREATE_TEMP_INDEX = 3
    CREATE_TEMP_TABLE = 4
    CREATE_TEMP_TRIGGER = 5
    CREATE_TEMP_VIEW = 6
    CREATE_TRIGGER = 7
    CREATE_VIEW = 8
    DELETE = 9
    DROP_INDEX = 10
    DROP_TABLE = 11
    DROP_TEMP_INDEX = 12
    DROP_TEMP_TABLE = 13
    DROP_TEMP_TRIGGER = 14
    DROP_TEMP_VIEW = 15
    DROP_TRIGGER = 16
    DROP_VIEW = 17
    INSERT = 18
    PRAGMA = 19
    READ = 20
    SELECT = 21
    TRANSACTION = 22
    UPDATE = 23
    ATTACH = 24
    DETACH = 25
    ALTER_TABLE = 26
    REINDEX = 27
    ANALYZE = 28
    CREATE_VTABLE = 29
    DROP_VTABLE = 30
    FUNCTION = 31
    SAVEPOINT = 32
    RECURSIVE = 33


@dataclass(frozen=True)
class AuthorizerEvent:
    """One authorizer call: the action code and its four string arguments, as SQLite passes them."""

    code: int
    arg1: str | None
    arg2: str | None
    schema: str | None
    source: str | None
    """The innermost trigger or view the action happens in, or None at the top level."""


# Actions that only read. FUNCTION and PRAGMA are decided case by case below.
_READ_ACTIONS = frozenset({Action.READ, Action.SELECT, Action.RECURSIVE})

# Pragmas that only report, whatever their argument (the argument names a table, index or limit).
_REPORTING_PRAGMAS = frozenset(
    {
        "collation_list", "compile_options", "database_list", "foreign_key_check", "foreign_key_list",
        "freelist_count", "function_list", "index_info", "index_list", "index_xinfo", "integrity_check",
        "module_list", "page_count", "pragma_list", "quick_check", "table_info", "table_list",
        "table_xinfo", "data_version", "stats",
    }
)  # fmt: skip

# Pragmas that report their value when given no argument and change it when given one.
_SETTING_PRAGMAS = frozenset(
    {
        "analysis_limit", "application_id", "auto_vacuum", "automatic_index", "busy_timeout",
        "cache_size", "cache_spill", "cell_size_check", "checkpoint_fullfsync", "defer_foreign_keys",
        "encoding", "foreign_keys", "fullfsync", "hard_heap_limit", "ignore_check_constraints",
        "journal_mode", "journal_size_limit", "legacy_alter_table", "locking_mode", "max_page_count",
        "mmap_size", "page_size", "query_only", "read_uncommitted", "recursive_triggers",
        "reverse_unordered_selects", "schema_version", "secure_delete", "soft_heap_limit", "synchronous",
        "temp_store", "threads", "trusted_schema", "user_version", "wal_autocheckpoint",
    }
)  # fmt: skip

# SQLite's journal modes, in the order it matches a pragma's value against them (pragma.c).
_JOURNAL_MODES = ("delete", "persist", "off", "truncate", "memory", "wal")

# Pragmas that set something for the whole process, not one connection: every database the server serves and
# its audit log. A hard heap limit can be lowered but never raised again; SQLite's documentation warns that
# changing the temporary directory while other connections are open is not safe.
_PROCESS_WIDE_PRAGMAS = frozenset(
    {"hard_heap_limit", "soft_heap_limit", "temp_store_directory", "data_store_directory"}
)

FTS_OPTIMIZE = "optimize"

# Functions that change the process or the database from inside a SELECT (FTS3/4's `optimize` merges its
# index, writing the table's shadow tables).
_EFFECTFUL_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", FTS_OPTIMIZE})
# What the connection ran last: a rolled-back trial run sets them too (a declined INSERT's dry run left its rowid
# in last_insert_rowid()), so a change using them would not use the value its sender meant.
_CONNECTION_STATE_FUNCTIONS = frozenset({"last_insert_rowid", "changes", "total_changes"})
# Settings kept in the database file, which every connection sees alike.
_FILE_SETTINGS = frozenset({"application_id", "auto_vacuum", "encoding", "page_size", "schema_version", "user_version"})
# What a change may not read through a pragma's table-valued form: its connection's settings and commit counter. The
# impact preview's dry run runs with settings of its own (`connections.dry_run_in_memory`), and may run on another
# connection than the approved run: `CASE WHEN (SELECT temp_store FROM pragma_temp_store) = 2 THEN ... END` changed
# two rows in the dry run and four once approved, the triggers' rows making up the count the approval held.
_CONNECTION_SETTINGS = (_SETTING_PRAGMAS - _FILE_SETTINGS) | {"data_version"}

# Built-in functions whose result is never much larger than their arguments, and whose work grows no faster
# than their arguments' size: each call is a short step of SQLite's program. Any other (printf, zeroblob,
# replace, hex, an application's own...) may build a value of any size allowed in one step, which no time limit
# stops halfway; and instr, trim, ltrim, rtrim, like and glob compare every place of one argument with much of
# the other (a 2,000,000-character instr takes hours); json_extract looks up each of any number of paths in its
# document (100 paths in 800 KB took 36 ms a call).
_BOUNDED_FUNCTIONS = frozenset(
    {
        "abs", "avg", "changes", "char_length", "coalesce", "count", "cume_dist", "date", "datetime",
        "dense_rank", "first_value", "ifnull", "iif", "json_array_length", "json_type", "json_valid", "julianday",
        "lag", "last_insert_rowid", "last_value", "lead", "length",
        "likelihood", "likely", "lower", "max", "min", "nth_value", "ntile", "nullif",
        "octet_length", "percent_rank", "random", "rank", "round", "row_number", "sign", "sqlite_version",
        "strftime", "substr", "substring", "sum", "time", "total", "total_changes", "typeof", "unicode",
        "unixepoch", "unlikely", "upper", "->", "->>",
        # math
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos", "cosh", "degrees",
        "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power", "radians", "sin", "sinh",
        "sqrt", "tan", "tanh", "trunc",
    }
)  # fmt: skip

# Opcodes of a compiled program that write to a database file or change the connection.
_WRITE_OPCODES = frozenset(
    {
        "OpenWrite", "Vacuum", "IncrVacuum", "JournalMode", "Checkpoint", "SqlExec", "VUpdate",
        "VCreate", "VDestroy", "VRename", "SetCookie", "ParseSchema", "CreateBtree", "Destroy", "Clear",
        "LoadAnalysis", "DropTable", "DropIndex", "DropTrigger",
    }
)  # fmt: skip

SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
"""The catalog tables, which SQLite itself updates while it loads or records the schema."""

INTERNAL_TABLES = SCHEMA_TABLES | {"sqlite_sequence", "sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"}

_CREATE_DROP = {
    Action.CREATE_INDEX: (ChangeKind.CREATE, ObjectType.INDEX),
    Action.CREATE_TEMP_INDEX: (ChangeKind.CREATE, ObjectType.INDEX),
    Action.CREATE_TABLE: (ChangeKind.CREATE, ObjectType.TABLE),
    Action.CREATE_TEMP_TABLE: (ChangeKind.CREATE, ObjectType.TABLE),
    Action.CREATE_TRIGGER: (ChangeKind.CREATE, ObjectType.TRIGGER),
    Action.CREATE_TEMP_TRIGGER: (ChangeKind.CREATE, ObjectType.TRIGGER),
    Action.CREATE_VIEW: (ChangeKind.CREATE, ObjectType.VIEW),
    Action.CREATE_TEMP_VIEW: (ChangeKind.CREATE, ObjectType.VIEW),
    Action.CREATE_VTABLE: (ChangeKind.CREATE, ObjectType.VIRTUAL_TABLE),
    Action.DROP_INDEX: (ChangeKind.DROP, ObjectType.INDEX),
    Action.DROP_TEMP_INDEX: (ChangeKind.DROP, ObjectType.INDEX),
    Action.DROP_TABLE: (ChangeKind.DROP, ObjectType.TABLE),
    Action.DROP_TEMP_TABLE: (ChangeKind.DROP, ObjectType.TABLE),
    Action.DROP_TRIGGER: (ChangeKind.DROP, ObjectType.TRIGGER),
    Action.DROP_TEMP_TRIGGER: (ChangeKind.DROP, ObjectType.TRIGGER),
    Action.DROP_VIEW: (ChangeKind.DROP, ObjectType.VIEW),
    Action.DROP_TEMP_VIEW: (ChangeKind.DROP, ObjectType.VIEW),
    Action.DROP_VTABLE: (ChangeKind.DROP, ObjectType.VIRTUAL_TABLE),
}
_TEMP_ACTIONS = frozenset(
    {
        Action.CREATE_TEMP_INDEX, Action.CREATE_TEMP_TABLE, Action.CREATE_TEMP_TRIGGER,
        Action.CREATE_TEMP_VIEW, Action.DROP_TEMP_INDEX, Action.DROP_TEMP_TABLE,
        Action.DROP_TEMP_TRIGGER, Action.DROP_TEMP_VIEW,
    }
)  # fmt: skip
WHOLE_STATEMENT = DatabaseObject(ObjectType.STATEMENT, "the statement")

_ROW_ACTIONS = {Action.INSERT: ChangeKind.INSERT, Action.UPDATE: ChangeKind.UPDATE, Action.DELETE: ChangeKind.DELETE}

# What a virtual table module does to its shadow tables through statements of its own: read and write
# their rows while it works, and drop, rename or index them along with the virtual table (xDestroy, xRename).
_SHADOW_ROW_ACTIONS = frozenset({Action.READ, Action.INSERT, Action.UPDATE, Action.DELETE})
_SHADOW_MODULE_ACTIONS = _SHADOW_ROW_ACTIONS | {
    Action.DROP_TABLE, Action.ALTER_TABLE, Action.CREATE_INDEX, Action.DROP_INDEX,
}  # fmt: skip


def pragma_only_reads(name: str | None, argument: str | None) -> bool:
    """True when `PRAGMA name[(argument)]` only reports and changes nothing."""
    pragma = (name or "").lower()
    return pragma in _REPORTING_PRAGMAS or (pragma in _SETTING_PRAGMAS and argument is None)


def _refused_setting(name: str | None, argument: str | None) -> str | None:
    """Why `PRAGMA name = argument` is refused whatever a person answers, or None: a setting that breaks what
    SafeDB relies on, on the one writer connection it runs on or in the whole server process.

    The value is read as SQLite reads it: a journal mode is the first mode (delete, persist, off, ...) that the
    value begins, ignoring case, so `o` and `Of` are OFF too; a locking mode is named in full."""
    pragma = (name or "").lower()
    if pragma == "journal_mode" and argument:
        mode = next((mode for mode in _JOURNAL_MODES if mode.startswith(argument.lower())), None)
        if mode == "off":
            return (
                "PRAGMA journal_mode = OFF is not allowed: without a journal SQLite cannot roll back, and every "
                "dry run, and every approved change that fails or changes another number of rows than shown, is "
                "rolled back."
            )
    if pragma in _PROCESS_WIDE_PRAGMAS and argument is not None:
        return (
            f"PRAGMA {pragma} = {argument} is not allowed: it sets SQLite's {pragma.replace('_', ' ')} for the "
            "whole server process, every database it serves and its audit log alike (a hard heap limit, once "
            "lowered, can never be raised again)."
        )
    if pragma == "locking_mode" and (argument or "").lower() == "exclusive":
        return (
            "PRAGMA locking_mode = EXCLUSIVE is not allowed: the connection it runs on would keep its lock on the "
            "database after its next change, locking out every other connection, SafeDB's own included (even the "
            "statement that would set it back), until the server restarts."
        )
    return None


def table_valued_pragma(event: AuthorizerEvent) -> str | None:
    """The pragma behind a read of its table-valued form (`SELECT * FROM pragma_optimize`), if any.

    SQLite reports only a read of the `pragma_<name>` table while compiling; the pragma itself runs when
    the statement does. Inside a WITH query or a view too (SQLite then names that as the read's source).
    """
    table = (event.arg1 or "").lower()
    if event.code == Action.READ and table.startswith("pragma_"):
        return table.removeprefix("pragma_")
    return None


def calls_only_bounded_functions(classification: Classification) -> bool:
    """Whether every function the statement calls returns a value about the size of its arguments at most,
    so that it has no single long step (see `_BOUNDED_FUNCTIONS`): those it names, those of the views and
    triggers it reaches, and those of the schema that its program calls (see `ProgramCall`)."""
    for record in classification.engine_view:
        if isinstance(record, AuthorizerEvent) and record.code == Action.FUNCTION:
            name = record.arg2 or ""
        elif isinstance(record, ProgramCall):
            name = record.name
        else:
            continue
        if name.lower() not in _BOUNDED_FUNCTIONS:
            return False
    return True


def is_read_event(event: AuthorizerEvent) -> bool:
    """True when the event, on its own, cannot change anything."""
    if (pragma := table_valued_pragma(event)) is not None:
        # A setting's table-valued form only reports it: a value passed to it would reach SQLite as
        # `PRAGMA name(value)` while running, where the reader's authorizer refuses it.
        return pragma in _REPORTING_PRAGMAS or pragma in _SETTING_PRAGMAS
    if event.code in _READ_ACTIONS:
        return True
    if event.code == Action.FUNCTION:
        return (event.arg2 or "").lower() not in _EFFECTFUL_FUNCTIONS
    if event.code == Action.PRAGMA:
        return pragma_only_reads(event.arg1, event.arg2)
    return False


VACUUM_INTO = "Vacuum INTO"


class Instruction(NamedTuple):
    """One instruction of a compiled program, as `EXPLAIN` lists it (the operands SafeDB looks at)."""

    opcode: str
    p2: int
    p3: int
    p4: str | None = None


class ProgramCall(NamedTuple):
    """A function that a statement's compiled program calls, kept in its classification's `engine_view`.

    SQLite compiles the expressions stored in the schema (CHECK constraints, defaults, generated columns,
    index expressions) into the program of each statement that uses them, without reporting their functions
    to the authorizer: `SELECT g FROM t` calls `instr` where `t.g` is `AS (instr(a, b))`.
    """

    name: str


# What a trigger's program calls is not listed (EXPLAIN shows it as one Program instruction); the functions
# in the schema of the tables it writes may be any.
TRIGGER_PROGRAM = ProgramCall("trigger program")
# SQLite leaves CHECK constraints out of the schema of a database it opened read-only, so the program an
# inspector compiles never calls their functions: they are read from the table's definition instead, and this
# stands for them when it cannot be read.
CHECK_CONSTRAINT = ProgramCall("check constraint")
_CALLING_OPCODES = frozenset({"Function", "PureFunc"})
# A table emptied (a DELETE without WHERE: SQLite's truncate optimization) or dropped in one step of its program,
# however large: no time limit stops it. Not a function, but, as one of unbounded cost, it keeps the statement off
# the event loop (`calls_only_bounded_functions`).
WHOLE_TABLE_STEP = ProgramCall("a whole table emptied or dropped in one step")
_WHOLE_TABLE_OPCODES = frozenset({"Clear", "Destroy"})


# Every opcode the functions here look at: the rest of a program is not kept (a statement may compile to
# hundreds of thousands of instructions, and so many objects make the garbage collector pause every thread).
EXAMINED_OPCODES = _WRITE_OPCODES | _CALLING_OPCODES | {"Program", "Transaction"}


def program_calls(program: list[Instruction]) -> frozenset[ProgramCall]:
    """The functions a compiled program calls, by name (P4 reads `instr(2)`), `TRIGGER_PROGRAM` when it
    runs a trigger's program, and `WHOLE_TABLE_STEP` when it empties or drops a table in one step."""
    calls = {
        ProgramCall(instruction.p4.rpartition("(")[0] or instruction.p4)
        for instruction in program
        if instruction.opcode in _CALLING_OPCODES and instruction.p4
    }
    if any(instruction.opcode == "Program" for instruction in program):
        calls.add(TRIGGER_PROGRAM)
    if any(instruction.opcode in _WHOLE_TABLE_OPCODES for instruction in program):
        calls.add(WHOLE_TABLE_STEP)
    return frozenset(calls)


# P3 of a JournalMode instruction that only reports the mode (PAGER_JOURNALMODE_QUERY).
_JOURNAL_MODE_QUERY = -1


def writes_in_program(program: list[Instruction]) -> list[str]:
    """Names of the writing opcodes in a compiled program.

    `VACUUM INTO` (a Vacuum opcode with a file name register in P2) is reported as `VACUUM_INTO`.
    """
    found = []
    for opcode, p2, p3, _ in program:
        if opcode == "Vacuum" and p2 != 0:
            found.append(VACUUM_INTO)
        elif opcode == "JournalMode" and p3 == _JOURNAL_MODE_QUERY:
            continue
        elif opcode in _WRITE_OPCODES or (opcode == "Transaction" and p2 != 0):
            found.append(opcode)
    return list(dict.fromkeys(found))


_SAVEPOINT_VERBS = {"BEGIN": "SAVEPOINT", "RELEASE": "RELEASE", "ROLLBACK": "ROLLBACK TO"}


def classify_events(
    statement: str,
    events: list[AuthorizerEvent],
    write_opcodes: list[str],
    shape: StatementShape,
    *,
    explain_only: bool = False,
    shadow_tables: frozenset[str] = frozenset(),
    written_tables: frozenset[str] = frozenset(),
    calls: frozenset[ProgramCall] = frozenset(),
) -> Classification:
    """Combine the engine's events, its compiled program and the parser's shape into one verdict.

    The statement is read-only only when all three agree: no writing event, no writing opcode, and a
    statement form that only reads. Row reads and writes on the shadow tables of virtual tables
    (`shadow_tables`, from SQLite's catalog) outside any trigger or view, by a statement that names their
    virtual table, are the module's own bookkeeping, reported when it first prepares its statements: they
    are left out. Anything else that names a shadow table (writing its rows directly, dropping, altering
    or indexing it, a trigger on it) is the statement's own, and so are the rows of `written_tables`, the
    shadow tables the statement's own program writes (`DELETE FROM docs_data WHERE EXISTS (SELECT * FROM
    docs)` names the virtual table too).

    `explain_only` marks a statement that SQLite will only list (`EXPLAIN ...`): its writes are never
    carried out, but pragmas still take effect while compiling. `calls` (see `ProgramCall`) are kept in the
    classification's `engine_view` beside the events.

    Raises:
        TransactionControl: the statement begins, ends or names a transaction or savepoint.
        TemporaryObject: the statement creates an object in the `temp` schema, which lives on one
            connection only.
        DeniedByPolicy: the statement reads `sqlite_stmt`, which lists what SafeDB's connections have
            prepared: other clients' statements among them; or it sets a pragma that `_refused_setting` refuses;
            or it changes the database and calls a function of `_CONNECTION_STATE_FUNCTIONS` or reads a setting of
            `_CONNECTION_SETTINGS`.
    """
    for event in events:
        if event.code == Action.TRANSACTION:
            raise TransactionControl(event.arg1 or "transaction control")
        if event.code == Action.SAVEPOINT:
            # SQLite names the operation on a savepoint as BEGIN, RELEASE or ROLLBACK: as the statement said it.
            verb = _SAVEPOINT_VERBS.get(event.arg1 or "", "SAVEPOINT")
            raise TransactionControl(" ".join(part for part in (verb, event.arg2) if part))
        # Every new temporary object is recorded in the temp schema's catalog (`CREATE TRIGGER temp.t ON
        # main.t` reports its trigger as main's, but not this).
        if event.code == Action.INSERT and is_schema_table(event.arg1) and event.schema == "temp":
            raise TemporaryObject
        if event.code == Action.READ and (event.arg1 or "").lower() == "sqlite_stmt":
            raise DeniedByPolicy(
                "sqlite_stmt lists the statements prepared on SafeDB's connections, which all clients share, "
                "so it would show other clients' queries; it is not available. Nothing was run."
            )
        if event.code == Action.PRAGMA and (refusal := _refused_setting(event.arg1, event.arg2)) is not None:
            raise DeniedByPolicy(f"{refusal} Nothing was run.")

    program_writes = bool(write_opcodes)
    # Named by the statement outside the shadow tables: the virtual tables whose modules may be at work.
    module_prefixes = tuple(
        f"{event.arg1.lower()}_" for event in events if event.arg1 and event.arg1 not in shadow_tables
    )
    module_tables = shadow_tables - written_tables
    events = [event for event in events if not _is_module_row_access(event, module_tables, module_prefixes)]
    changes = [change for event in events if (change := _change_for(event, shape)) is not None]
    if explain_only:
        changes = [change for change in changes if change.kind is ChangeKind.PRAGMA]
    else:
        changes = _without_implied(_without_internal_bookkeeping(changes, program_writes))
        changes.extend(_program_changes(write_opcodes, changes, shape))
        if not changes and not shape.read_form:
            detail = f"SQLite reports no change but the parser cannot confirm a read ({shape.root})"
            changes.append(Change(ChangeKind.UNKNOWN, WHOLE_STATEMENT, None, detail))
    if changes and not explain_only and (state := _connection_state_calls(events, calls)):
        raise DeniedByPolicy(
            f"{state}() reports what SafeDB's connection, which all clients share, ran last (the trial run of "
            "another client's change among them), not what you ran before: in a change it would use another value "
            "than you expect. Nothing was run. Use the value itself (INSERT ... RETURNING shows the rowid of a "
            "row you insert)."
        )
    if changes and not explain_only and (setting := _connection_setting_read(events)):
        raise DeniedByPolicy(
            f"pragma_{setting} reports a setting of the SafeDB connection a statement runs on, which the dry run that "
            "measures a change's impact sets otherwise than the approved run: in a change, it could make the question "
            "show something other than what would run. Nothing was run."
        )
    reads = tuple(dict.fromkeys(e.arg1 for e in events if e.code == Action.READ and e.arg1))
    runs = tuple(sorted({event.source for event in events if event.source}))
    return Classification(
        statement=statement,
        changes=tuple(dict.fromkeys(changes)),
        reads=reads,
        engine_view=frozenset(events) | calls,
        runs=runs,
    )


def _connection_state_calls(events: list[AuthorizerEvent], calls: frozenset[ProgramCall]) -> str | None:
    """The first function the statement calls that reports the connection's past (`_CONNECTION_STATE_FUNCTIONS`)."""
    names = [event.arg2 or "" for event in events if event.code == Action.FUNCTION] + [call.name for call in calls]
    return next((name.lower() for name in names if name.lower() in _CONNECTION_STATE_FUNCTIONS), None)


def _connection_setting_read(events: list[AuthorizerEvent]) -> str | None:
    """The first connection setting (`_CONNECTION_SETTINGS`) the statement reads through a pragma's table form."""
    pragmas = (table_valued_pragma(event) for event in events)
    return next((pragma for pragma in pragmas if pragma in _CONNECTION_SETTINGS), None)


def _change_for(event: AuthorizerEvent, shape: StatementShape) -> Change | None:
    if is_read_event(event):
        return None
    code, schema, via = event.code, event.schema, event.source
    if code in _ROW_ACTIONS:
        kind = _ROW_ACTIONS[Action(code)]
        if kind is ChangeKind.INSERT and via is None and shape.insert_variant is not None:
            kind = shape.insert_variant
        return Change(kind, DatabaseObject(ObjectType.TABLE, event.arg1 or "?", schema), via)
    if code in _CREATE_DROP:
        kind, object_type = _CREATE_DROP[Action(code)]
        if code in _TEMP_ACTIONS:
            schema = "temp"
        return Change(kind, DatabaseObject(object_type, event.arg1 or "?", schema), via)
    if code == Action.ALTER_TABLE:
        kind = ChangeKind.RENAME if shape.renamed_to is not None else ChangeKind.ALTER
        return Change(kind, DatabaseObject(ObjectType.TABLE, event.arg2 or "?", event.arg1), via)
    if code == Action.ATTACH:
        # An empty name is a valid temporary database, not an unknown file.
        return Change(
            ChangeKind.ATTACH, DatabaseObject(ObjectType.FILE, event.arg1 if event.arg1 is not None else "?"), via
        )
    if code == Action.DETACH:
        return Change(ChangeKind.DETACH, DatabaseObject(ObjectType.DATABASE, event.arg1 or "?"), via)
    if code == Action.REINDEX:
        return Change(ChangeKind.REINDEX, DatabaseObject(ObjectType.INDEX, event.arg1 or "?", schema), via)
    if code == Action.ANALYZE:
        return Change(ChangeKind.ANALYZE, DatabaseObject(ObjectType.TABLE, event.arg1 or "?", schema), via)
    if (pragma_name := table_valued_pragma(event)) is not None:
        return Change(ChangeKind.PRAGMA, DatabaseObject(ObjectType.PRAGMA, pragma_name), via, "table-valued form")
    if code == Action.PRAGMA:
        pragma = (event.arg1 or "?").lower()
        detail = f"= {event.arg2}" if event.arg2 is not None else None
        return Change(ChangeKind.PRAGMA, DatabaseObject(ObjectType.PRAGMA, pragma, schema), via, detail)
    if code == Action.FUNCTION:
        name = (event.arg2 or "?").lower()
        kind = ChangeKind.LOAD_EXTENSION if name == "load_extension" else ChangeKind.UNKNOWN
        return Change(kind, DatabaseObject(ObjectType.FUNCTION, name), via)
    return Change(ChangeKind.UNKNOWN, WHOLE_STATEMENT, via, f"authorizer action {code}")


def _program_changes(write_opcodes: list[str], found: list[Change], shape: StatementShape) -> list[Change]:
    """Changes visible only in the compiled program, or writes the events did not explain."""
    if VACUUM_INTO in write_opcodes:
        return [
            Change(
                ChangeKind.VACUUM,
                DatabaseObject(ObjectType.FILE, "?" if shape.into_path is None else shape.into_path),
                None,
                "INTO",
            )
        ]
    if "Vacuum" in write_opcodes:
        return [Change(ChangeKind.VACUUM, DatabaseObject(ObjectType.DATABASE, "main"))]
    if write_opcodes and not found:
        detail = "compiled program writes: " + ", ".join(write_opcodes)
        return [Change(ChangeKind.UNKNOWN, WHOLE_STATEMENT, None, detail)]
    return []


def is_shadow_bookkeeping(event: AuthorizerEvent, shadow_tables: frozenset[str]) -> bool:
    """An event a virtual table module may cause on its own shadow tables while a statement runs (never
    inside a trigger or view): row access, and dropping, renaming or indexing them with the virtual table."""
    return (
        event.source is None
        and event.code in _SHADOW_MODULE_ACTIONS
        and (event.arg1 in shadow_tables or event.arg2 in shadow_tables)
    )


def _is_module_row_access(
    event: AuthorizerEvent, shadow_tables: frozenset[str], module_prefixes: tuple[str, ...]
) -> bool:
    """Row access on a shadow table outside any trigger or view, while the statement names its virtual table
    (`docs` for `docs_content`): what a module does while it prepares. A statement that names only the
    shadow table (`DELETE FROM docs_content`) is changing it itself."""
    return (
        event.source is None
        and event.code in _SHADOW_ROW_ACTIONS
        and event.arg1 in shadow_tables
        and event.arg1.lower().startswith(module_prefixes)
    )


def is_internal_table(name: str | None) -> bool:
    return (name or "").lower() in INTERNAL_TABLES


def is_schema_table(name: str | None) -> bool:
    return (name or "").lower() in SCHEMA_TABLES


def _without_internal_bookkeeping(changes: list[Change], program_writes: bool) -> list[Change]:
    """Drop events on SQLite's own tables (sqlite_schema, sqlite_sequence...) that are not writes of their own.

    SQLite reports updates of sqlite_schema while it loads the schema or declares a virtual table,
    and while it records a CREATE or DROP; only the compiled program tells whether anything is
    written. What other changes explain is left out; what nothing else explains is kept. Changes made
    by a trigger or view are never SQLite's own: they are always kept.
    """
    visible = [
        c
        for c in changes
        if not (c.target.type is ObjectType.TABLE and is_internal_table(c.target.name) and c.via is None)
    ]
    if visible or not program_writes:
        return visible
    return changes


def _without_implied(changes: list[Change]) -> list[Change]:
    """Drop steps SQLite takes to carry out another change: deleting the rows of a dropped table,
    building a new index."""
    dropped = {(c.target.name, c.target.schema) for c in changes if c.kind is ChangeKind.DROP}
    created_indexes = {
        c.target.name for c in changes if c.kind is ChangeKind.CREATE and c.target.type is ObjectType.INDEX
    }
    return [
        c
        for c in changes
        if not (c.kind is ChangeKind.DELETE and (c.target.name, c.target.schema) in dropped)
        and not (c.kind is ChangeKind.REINDEX and c.target.name in created_indexes)
    ]
