"""Classify one PostgreSQL statement with PostgreSQL's own parser (pglast, libpg_query). Pure: no connection.

The whole tree is walked: CTEs, subqueries, FROM-clause functions, attribute notation (`(x).f` is a call
of `f(x)`), `SELECT ... INTO`, row locks. What the tree alone cannot tell (is this function free of side
effects? does this view call one?) is returned as references for the backend to resolve in the catalog
(`safedb.sql.postgres_functions.function_changes`). Anything unparsable, unknown or mixed is not read-only.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, AlterTableType, JsonExprOp, OnConflictAction, SubLinkType
from pglast.parser import ParseError

from safedb.errors import DeniedByPolicy, EmptyStatement, InvalidStatement, MultipleStatements, TemporaryObject
from safedb.sql.classification import (
    MAX_STATEMENT_CHARS,
    Change,
    ChangeKind,
    Classification,
    DatabaseObject,
    ObjectType,
)
from safedb.sql.postgres_functions import FunctionRef
from safedb.sql.postgres_maintenance import stored_code_run
from safedb.sql.postgres_tree import QualifiedName, option_enabled, string_constant, strings, walk
from safedb.sql.postgres_utility import (
    refuse_session_statement,
    refuse_temporary,
    runs_outside_transaction,
    temporary_schema,
    utility_changes,
)

# Statements whose expressions are evaluated when they run (function calls in them execute).
_EXECUTING = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt, ast.CreateTableAsStmt)
_DML = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)
_SYSTEM_OPERATOR_SCHEMA = _SYSTEM_TYPE_SCHEMA = "pg_catalog"
# Subqueries compared with an operator: `x op ANY (...)`, `x op ALL (...)`, `ROW(...) op (...)`.
_COMPARING_SUBLINKS = frozenset({SubLinkType.ANY_SUBLINK, SubLinkType.ALL_SUBLINK, SubLinkType.ROWCOMPARE_SUBLINK})

_BETWEEN = frozenset(
    {
        A_Expr_Kind.AEXPR_BETWEEN,
        A_Expr_Kind.AEXPR_NOT_BETWEEN,
        A_Expr_Kind.AEXPR_BETWEEN_SYM,
        A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM,
    }
)

_DROPPING_PARTS = frozenset({AlterTableType.AT_DropColumn, AlterTableType.AT_DropConstraint})

# The parser reads these calls with PostgreSQL 17's grammar, as SQL/JSON expressions. A server on an older
# version reads them as calls to whatever function of that name exists (a user's own, possibly), so they
# are looked up as functions too.
_SQL_JSON_CALLS: dict[type[ast.Node], str] = {
    ast.JsonScalarExpr: "json_scalar",
    ast.JsonParseExpr: "json",
    ast.JsonSerializeExpr: "json_serialize",
    ast.JsonArrayConstructor: "json_array",
    ast.JsonArrayQueryConstructor: "json_array",
    ast.JsonObjectConstructor: "json_object",
    ast.JsonArrayAgg: "json_arrayagg",
    ast.JsonObjectAgg: "json_objectagg",
    ast.JsonTable: "json_table",
    ast.MergeSupportFunc: "merge_action",
}
_SQL_JSON_QUERIES = {
    JsonExprOp.JSON_EXISTS_OP: "json_exists",
    JsonExprOp.JSON_QUERY_OP: "json_query",
    JsonExprOp.JSON_VALUE_OP: "json_value",
    JsonExprOp.JSON_TABLE_OP: "json_table",
}


@dataclass(frozen=True)
class PostgresStatement:
    """One statement as the parser sees it, plus what the backend must still look up."""

    classification: Classification
    """Changes the tree alone shows; the backend adds those of functions and views."""
    text: str
    """The statement itself, without surrounding semicolons: what is sent to the server."""
    root: str
    functions: tuple[FunctionRef, ...] = ()
    operators: tuple[str, ...] = ()
    open_operators: tuple[str, ...] = ()
    """Operators applied to untyped literals only (`'a' === 'b'`), which take their operand types from the
    operator: they count whatever types the statement meets."""
    half_open_operators: tuple[str, ...] = ()
    """Operators applied to an untyped literal and a typed value (`1 <=> 'calm'`): the literal takes its type
    from the operator, so they count where the statement meets either operand's type."""
    relations: tuple[QualifiedName, ...] = ()
    types: tuple[str, ...] = ()
    """Types the statement may convert values to (casts, and calls that may be casts), as `to_regtype` reads
    them: a domain's checks run on each conversion."""
    in_transaction: bool = True
    """False for statements PostgreSQL runs only outside a transaction block (VACUUM, CREATE DATABASE...)."""
    cursor_read: bool = False
    """A SELECT or VALUES that can be read through a server-side cursor."""
    takes_row_limit: bool = False
    """A cursor read with no LIMIT or FETCH FIRST of its own: a LIMIT after it bounds the rows PostgreSQL makes."""
    uses_default: bool = False
    """The statement writes column defaults (INSERT, or `DEFAULT` in UPDATE/MERGE)."""
    returns_rows: bool = False
    """Rows come back when it runs: a SELECT (without INTO), or a data change with RETURNING."""
    counts_changed_rows: bool = False
    """PostgreSQL's row count for it is the rows it changes: a plain INSERT, UPDATE, DELETE or MERGE, with no
    data-modifying query in its WITH clause (whose rows the count leaves out)."""
    plans_write_rules: bool = False
    """An EXPLAIN of INSERT, UPDATE, DELETE or MERGE: planning it takes in the actions of its tables' rules for
    that kind of change (and the defaults of the tables they write to), as a read plans only SELECT rules."""
    runs_stored_code: bool = False
    """A maintenance or index statement that runs stored code of `relations` (or of every relation, with
    `every_relation`) when it is approved (`safedb.sql.postgres_maintenance`): judged as planning a read of them
    would be, named in its question."""
    every_relation: bool = False
    view_queries: bool = True
    """The queries of the views and materialized views among `relations` run (False for a maintenance statement
    other than REFRESH: it rebuilds or measures a materialized view without running its query)."""
    drops_dependents: bool = False
    """A DROP, or an ALTER TABLE that only drops columns or constraints: with CASCADE, it also drops the
    objects that depend on what it drops."""

    def with_changes(self, extra: list[Change]) -> Classification:
        changes = tuple(dict.fromkeys((*self.classification.changes, *extra)))
        return replace(self.classification, changes=changes)


# The parser recurses on the C stack once per level of a left-nested expression (`1+1+1...`), some 340
# bytes a level, and a stack overflow kills the whole process. Statements short enough to be safe on any
# thread's stack are parsed where they are; longer ones in one thread with a large stack, which holds
# statements up to MAX_STATEMENT_CHARS with room to spare (measured: 190,000 `+1` levels fit in 64 MiB).
_SHORT_STATEMENT_CHARS = 10_000
_PARSER_STACK_BYTES = 256 * 1024 * 1024

PG_SPACE = " \t\n\r\f\v"
"""What PostgreSQL's scanner takes for white space. `str.strip()` takes more: a no-break space, U+3000 and others,
which the scanner reads as part of a name (`ledger` + U+00A0 is another table than `ledger`)."""


def parse_one(sql: str) -> tuple[ast.RawStmt, str]:
    """The single statement in `sql` and its text. Raises EmptyStatement, MultipleStatements, InvalidStatement."""
    if "\x00" in sql:
        # The parser and the server both stop reading at a NUL: what follows it would be shown, never run.
        raise InvalidStatement("The statement contains a NUL character, which PostgreSQL cannot take.")
    if len(sql) > MAX_STATEMENT_CHARS:
        raise InvalidStatement(
            f"The statement is {len(sql):,} characters long; SafeDB takes PostgreSQL statements of up to "
            f"{MAX_STATEMENT_CHARS:,} characters."
        )
    try:
        statements = parse_statements(sql)
    except ParseError as exc:
        raise InvalidStatement(f"PostgreSQL cannot parse this statement: {exc}") from exc
    except ValueError as exc:  # e.g. text the parser cannot encode
        raise InvalidStatement(f"PostgreSQL cannot parse this statement: {exc}") from exc
    if not statements:
        raise EmptyStatement
    if len(statements) > 1:
        raise MultipleStatements
    raw = statements[0]
    # pglast counts the statement's place in characters of `sql`, not in bytes.
    start = raw.stmt_location or 0
    end = start + raw.stmt_len if raw.stmt_len else len(sql)
    return raw, sql[start:end].strip(PG_SPACE)


def parse_statements(sql: str) -> tuple[ast.RawStmt, ...]:
    """`parse_sql(sql)`, on the thread with a large stack when `sql` is long enough to overflow another's: any
    text SafeDB parses, also a function body the catalog holds (which PostgreSQL may never have parsed)."""
    return parse_sql(sql) if len(sql) <= _SHORT_STATEMENT_CHARS else _parse_on_large_stack(sql)


def _parse_on_large_stack(sql: str) -> tuple[ast.RawStmt, ...]:
    return _large_stack_parser().submit(parse_sql, sql).result()


@functools.cache
def _large_stack_parser() -> ThreadPoolExecutor:
    """One thread with a stack of `_PARSER_STACK_BYTES` (started at once: the size applies to new threads)."""
    previous = threading.stack_size(_PARSER_STACK_BYTES)
    try:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="safedb-pg-parser")
        executor.submit(int).result()
    finally:
        threading.stack_size(previous)
    return executor


def analyze_statement(sql: str) -> PostgresStatement:
    """Classify `sql`, which must hold exactly one statement.

    The result depends on the text alone, and one approved call needs it up to four times (classify,
    preview, write, read), so results are remembered: the most recent 1,024 statements up to
    `_SHORT_STATEMENT_CHARS`, and the most recent 4 longer ones (which take up to a second to parse).

    Raises:
        EmptyStatement, MultipleStatements, InvalidStatement, TransactionControl, DeniedByPolicy.
    """
    if len(sql) <= _SHORT_STATEMENT_CHARS:
        return _remembered_short(sql)
    return _remembered_long(sql)


def _analyze(sql: str) -> PostgresStatement:
    raw, text = parse_one(sql)
    node = raw.stmt
    if node is None:
        raise EmptyStatement
    refuse_temporary(node.query if isinstance(node, ast.ExplainStmt) and node.query is not None else node)
    root = type(node).__name__
    if isinstance(node, ast.VariableShowStmt):
        return PostgresStatement(Classification(statement=sql), text, root)
    if isinstance(node, ast.ExplainStmt):
        return _explain(sql, text, node)
    if isinstance(node, ast.CopyStmt):
        _refuse_copy(node)
    if isinstance(node, _EXECUTING):
        return _executing(sql, text, node)
    changes = utility_changes(node)
    if any(change.kind is ChangeKind.CREATE and temporary_schema(change.target.schema) for change in changes):
        raise TemporaryObject  # a function, type, domain... in pg_temp
    code = stored_code_run(node)
    found = [_references(expression) for expression in code.expressions]
    functions: tuple[FunctionRef, ...] = tuple(ref for part in found for ref in part.functions)
    if isinstance(node, ast.CallStmt):
        # The procedure itself is the CALL change (the code it runs is named with its definition, see
        # `fired_code`); functions in its arguments are judged like any other.
        arguments = node.funccall.args if node.funccall is not None else None
        functions = tuple(ref for arg in arguments or () for ref in _references(arg).functions)
        changes = [Change(ChangeKind.CALL, _procedure(node), None, None)]
    return PostgresStatement(
        Classification(statement=sql, changes=tuple(dict.fromkeys(changes))),
        text,
        root,
        functions=tuple(dict.fromkeys(functions)),
        operators=tuple(dict.fromkeys(name for part in found for name in part.operators)),
        relations=code.relations,
        types=tuple(dict.fromkeys(name for part in found for name in part.types)),
        runs_stored_code=bool(code.relations or code.every_relation or code.expressions),
        every_relation=code.every_relation,
        view_queries=code.view_queries,
        in_transaction=not runs_outside_transaction(node),
        drops_dependents=any(change.kind is ChangeKind.DROP for change in changes) or _only_drops_parts(node),
    )


def _only_drops_parts(node: ast.Node) -> bool:
    """ALTER TABLE ... DROP COLUMN / DROP CONSTRAINT, and nothing else (a dry run of anything else could rewrite
    the whole table)."""
    if not isinstance(node, ast.AlterTableStmt) or not node.cmds:
        return False
    return all(isinstance(command, ast.AlterTableCmd) and command.subtype in _DROPPING_PARTS for command in node.cmds)


_remembered_short = functools.lru_cache(maxsize=1024)(_analyze)
_remembered_long = functools.lru_cache(maxsize=4)(_analyze)


def _procedure(node: ast.CallStmt) -> DatabaseObject:
    name = QualifiedName.from_list(node.funccall.funcname if node.funccall is not None else None)
    return DatabaseObject(ObjectType.PROCEDURE, name.name, name.schema)


def _explain(sql: str, text: str, node: ast.ExplainStmt) -> PostgresStatement:
    """EXPLAIN only plans; EXPLAIN ANALYZE runs the statement, so it is what the statement is.

    Planning runs code too: it folds calls of immutable functions, evaluates stable ones to estimate, inlines
    SQL functions and puts column defaults into the plan. So EXPLAIN is judged by what the statement calls,
    as a read of it would be, without the changes the statement would make; one that writes column defaults
    asks as the statement does. `EXPLAIN DECLARE` plans the cursor's query."""
    inner = node.query
    if not option_enabled(node.options, "analyze"):
        if isinstance(inner, ast.DeclareCursorStmt):
            inner = inner.query  # EXPLAIN DECLARE plans the cursor's query
        if isinstance(inner, ast.ExecuteStmt):
            # Plans a prepared statement of the session (SafeDB's hold none) with arguments PostgreSQL evaluates.
            refuse_session_statement(inner)
        if not isinstance(inner, _EXECUTING):
            return PostgresStatement(Classification(statement=sql), text, "ExplainStmt")
        planned = _executing(sql, text, inner)
        classification = planned.classification if planned.uses_default else Classification(statement=sql)
        return replace(
            planned,
            classification=classification,
            root="ExplainStmt",
            cursor_read=False,
            takes_row_limit=False,
            returns_rows=False,
            counts_changed_rows=False,
            plans_write_rules=isinstance(inner, _DML),
        )
    if inner is None:
        raise InvalidStatement("EXPLAIN needs a statement to explain.")
    if not isinstance(inner, _EXECUTING):
        # EXECUTE, DECLARE and the like: refused on their own.
        utility_changes(inner)
        raise InvalidStatement(f"EXPLAIN ANALYZE of {type(inner).__name__} is not supported.")
    analysis = _executing(sql, text, inner)
    # Its result is the plan, so the row count PostgreSQL reports is the plan's lines, not the rows changed.
    return replace(
        analysis,
        root="ExplainStmt",
        cursor_read=False,
        takes_row_limit=False,
        returns_rows=False,
        counts_changed_rows=False,
    )


def _refuse_copy(node: ast.CopyStmt) -> None:
    if node.is_program:
        raise DeniedByPolicy("COPY ... PROGRAM runs a shell command on the database server; it is never allowed.")
    if node.filename is not None:
        raise DeniedByPolicy(
            f"COPY {'FROM' if node.is_from else 'TO'} a file reads or writes files on the database server, which "
            "SafeDB does not allow. Nothing was run."
        )
    raise DeniedByPolicy(
        f"COPY {'FROM STDIN' if node.is_from else 'TO STDOUT'} needs a data channel that an MCP tool call does "
        f"not have. Nothing was run; use {'INSERT' if node.is_from else 'SELECT'} instead."
    )


@dataclass
class _References:
    functions: list[FunctionRef]
    operators: list[str]
    relations: list[QualifiedName]
    changes: list[Change]
    types: list[str]
    uses_default: bool = False
    open_operators: list[str] = field(default_factory=list)
    half_open_operators: list[str] = field(default_factory=list)


def _references(root: ast.Node) -> _References:
    """Everything under `root` that runs or writes: nested data changes, function calls, operators, relations."""
    found = _References([], [], [], [], [])
    for node in walk(root):
        if isinstance(node, ast.FuncCall):
            name = QualifiedName.from_list(node.funcname)
            argument = string_constant(node.args[0]) if node.args else None
            found.functions.append(FunctionRef(name.name, name.schema, argument=argument))
            if len(node.args or ()) == 1:
                found.types.append(name.quoted())  # `name(x)` is a cast when `name` is a type
        elif isinstance(node, ast.TypeName):
            _note_type(found, node)
        elif (sql_json := _SQL_JSON_CALLS.get(type(node))) is not None:
            found.functions.append(FunctionRef(sql_json, grammar=True))
        elif isinstance(node, ast.JsonFuncExpr) and node.op is not None:
            found.functions.append(FunctionRef(_SQL_JSON_QUERIES[node.op], grammar=True))
        elif isinstance(node, ast.ColumnRef):
            fields = strings(node.fields)
            if len(fields) >= 2 and len(fields) == len(node.fields or ()):
                found.functions.append(FunctionRef(fields[-1], attribute=True))
        elif isinstance(node, ast.A_Indirection):
            for part in node.indirection or ():
                if isinstance(part, ast.String) and part.sval:
                    found.functions.append(FunctionRef(part.sval, attribute=True))
        elif isinstance(node, ast.A_Expr) and node.kind in _BETWEEN:
            found.operators.extend((">=", "<="))  # `x BETWEEN a AND b` compares with `>=` and `<=`
        elif isinstance(node, ast.A_Expr) and node.name:
            untyped = [_untyped(operand) for operand in (node.lexpr, node.rexpr) if operand is not None]
            _note_operator(found, node.name, untyped=all(untyped), partly_untyped=any(untyped))
        elif isinstance(node, ast.JoinExpr) and (node.usingClause or node.isNatural):
            found.operators.append("=")  # USING and NATURAL joins compare with the type's `=`
        elif isinstance(node, ast.SubLink) and node.subLinkType in _COMPARING_SUBLINKS:
            # `x op ANY (SELECT ...)`; without an operator (`x IN (SELECT ...)`), the type's `=`.
            if node.operName:
                _note_operator(found, node.operName)
            else:
                found.operators.append("=")
        elif isinstance(node, ast.SortBy) and node.useOp:
            _note_operator(found, node.useOp)  # ORDER BY x USING op
        elif isinstance(node, ast.CaseExpr) and node.arg is not None:
            found.operators.append("=")  # CASE x WHEN v: the type's `=`
        elif isinstance(node, ast.RangeVar):
            found.relations.append(QualifiedName.from_range_var(node))
        elif isinstance(node, ast.RangeTableFunc):
            found.functions.append(FunctionRef("xmltable", "pg_catalog"))  # XMLTABLE evaluates XPath
        elif isinstance(node, ast.SetToDefault):
            found.uses_default = True
        found.changes.extend(_node_changes(node))
    return found


def _untyped(node: object) -> bool:
    """A literal whose type PostgreSQL takes from the operator it meets (`'calm'`, `NULL`)."""
    return isinstance(node, ast.A_Const) and (node.isnull or isinstance(node.val, ast.String))


def _note_type(found: _References, node: ast.TypeName) -> None:
    name = QualifiedName.from_list(node.names)
    if name.schema != _SYSTEM_TYPE_SCHEMA:  # the parser's own names for SQL's types (`integer`...)
        found.types.append(name.quoted() + ("[]" if node.arrayBounds else ""))


def _note_operator(
    found: _References, name: tuple[object, ...] | list[object], untyped: bool = False, partly_untyped: bool = False
) -> None:
    operator = QualifiedName.from_list(name)
    if operator.schema != _SYSTEM_OPERATOR_SCHEMA:
        found.operators.append(operator.name)
        if untyped:
            found.open_operators.append(operator.name)
        elif partly_untyped:
            found.half_open_operators.append(operator.name)


def _node_changes(node: ast.Node) -> list[Change]:
    if isinstance(node, ast.InsertStmt):
        kind = ChangeKind.INSERT
        conflict = node.onConflictClause
        if conflict is not None and conflict.action == OnConflictAction.ONCONFLICT_UPDATE:
            kind = ChangeKind.UPSERT
        return [Change(kind, _table(node.relation))]
    if isinstance(node, ast.UpdateStmt):
        return [Change(ChangeKind.UPDATE, _table(node.relation))]
    if isinstance(node, ast.DeleteStmt):
        return [Change(ChangeKind.DELETE, _table(node.relation))]
    if isinstance(node, ast.MergeStmt):
        return [Change(ChangeKind.MERGE, _table(node.relation))]
    if isinstance(node, ast.SelectStmt):
        changes = []
        if node.intoClause is not None:
            into = node.intoClause.rel
            changes.append(Change(ChangeKind.CREATE, _table(into), None, "SELECT ... INTO"))
        if node.lockingClause:
            for table in _locked_tables(node):
                changes.append(Change(ChangeKind.LOCK, table, None, "row locks (SELECT ... FOR UPDATE/SHARE)"))
        return changes
    if isinstance(node, ast.CreateTableAsStmt):
        into = node.into.rel if node.into is not None else None
        created = ObjectType.MATERIALIZED_VIEW if "MATVIEW" in str(node.objtype) else ObjectType.TABLE
        name = QualifiedName.from_range_var(into)
        return [Change(ChangeKind.CREATE, DatabaseObject(created, name.name, name.schema), None, "AS query")]
    return []


def _locked_tables(node: ast.SelectStmt) -> list[DatabaseObject]:
    named = [
        _table(relation)
        for clause in node.lockingClause or ()
        if isinstance(clause, ast.LockingClause)
        for relation in clause.lockedRels or ()
        if isinstance(relation, ast.RangeVar)
    ]
    if named:
        return named
    tables = [_table(item) for item in node.fromClause or () if isinstance(item, ast.RangeVar)]
    return tables or [DatabaseObject(ObjectType.STATEMENT, "rows read by the statement")]


def _table(relation: ast.RangeVar | None) -> DatabaseObject:
    name = QualifiedName.from_range_var(relation)
    return DatabaseObject(ObjectType.TABLE, name.name, name.schema)


def _executing(sql: str, text: str, node: ast.Node) -> PostgresStatement:
    found = _references(node)
    uses_default = found.uses_default or any(kind is ChangeKind.INSERT for kind in (c.kind for c in found.changes))
    cursor_read = isinstance(node, ast.SelectStmt) and not found.changes
    return PostgresStatement(
        Classification(statement=sql, changes=tuple(dict.fromkeys(found.changes))),
        text,
        type(node).__name__,
        functions=tuple(dict.fromkeys(found.functions)),
        operators=tuple(dict.fromkeys(found.operators)),
        open_operators=tuple(dict.fromkeys(found.open_operators)),
        half_open_operators=tuple(dict.fromkeys(found.half_open_operators)),
        relations=tuple(dict.fromkeys(found.relations)),
        types=tuple(dict.fromkeys(found.types)),
        cursor_read=cursor_read,
        takes_row_limit=cursor_read and isinstance(node, ast.SelectStmt) and node.limitCount is None,
        returns_rows=_returns_rows(node),
        uses_default=uses_default or any(c.kind in (ChangeKind.UPSERT, ChangeKind.MERGE) for c in found.changes),
        counts_changed_rows=isinstance(node, _DML) and not any(isinstance(cte.ctequery, _DML) for cte in _ctes(node)),
    )


def _returns_rows(node: ast.Node) -> bool:
    if isinstance(node, ast.SelectStmt):
        # `SELECT 1 INTO t UNION SELECT 2` creates t (PostgreSQL takes the INTO of the leftmost SELECT).
        while node.larg is not None:
            node = node.larg
        return node.intoClause is None
    return isinstance(node, _DML) and node.returningClause is not None


def _ctes(node: ast.Node) -> tuple[ast.CommonTableExpr, ...]:
    """The common table expressions of a statement's own WITH clause (where data-modifying ones must be)."""
    clause = getattr(node, "withClause", None)
    ctes = (clause.ctes if clause is not None else None) or ()
    return tuple(cte for cte in ctes if isinstance(cte, ast.CommonTableExpr))
