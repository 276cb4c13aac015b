"""The stored code a maintenance or index statement runs when it is approved, as the parser sees it.

`REFRESH MATERIALIZED VIEW` runs the view's query; `ANALYZE` (also `VACUUM (ANALYZE)`) computes the
statistics of expression indexes and extended statistics' expressions, and sorts values with their types'
comparison functions; `VACUUM FULL`, `CLUSTER` and `REINDEX` rebuild indexes, evaluating their expressions and
predicates for every row; `CREATE INDEX` evaluates its own expressions and predicate for every row; `ALTER TABLE`
evaluates the expressions it adds (a `USING` conversion, a default or generated column, a check) for every row,
and where it rewrites or checks the table (a column's new type, a validated constraint, an attached partition)
the table's own stored code as well; a partition's bounds (`CREATE TABLE ... PARTITION OF`, `ATTACH PARTITION`) are
evaluated as it is made or attached; `ALTER DOMAIN ... ADD CONSTRAINT` evaluates its check for every stored value of
the domain, and `VALIDATE CONSTRAINT` an existing one. Each is
judged in the backend as a read of the relations would be (`safedb.db.postgres.catalog.function_facts`), so
that its question names the functions that may do more than read, and file access is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pglast import ast
from pglast.enums import AlterTableType

from safedb.sql.postgres_tree import QualifiedName, option_enabled


@dataclass(frozen=True)
class StoredCodeRun:
    relations: tuple[QualifiedName, ...] = ()
    """The relations (tables, materialized views, indexes) whose stored code the statement runs."""
    every_relation: bool = False
    """The statement runs the stored code of every relation it may reach (`VACUUM FULL`, `ANALYZE`, `CLUSTER`
    or `REINDEX` without a relation, `REINDEX SCHEMA`/`DATABASE`)."""
    expressions: tuple[ast.Node, ...] = ()
    """Expressions of the statement itself that run for every row (a new index's expressions and predicate)."""
    view_queries: bool = True
    """A materialized view's query runs (REFRESH); other maintenance of one runs only its stored code."""


def stored_code_run(node: ast.Node) -> StoredCodeRun:
    """What of the database's stored code `node` (a utility statement) runs; nothing for other statements."""
    if isinstance(node, ast.RefreshMatViewStmt) and node.relation is not None:
        return StoredCodeRun((QualifiedName.from_range_var(node.relation),), view_queries=True)
    if isinstance(node, ast.VacuumStmt):
        if node.is_vacuumcmd and not (option_enabled(node.options, "full") or option_enabled(node.options, "analyze")):
            return StoredCodeRun()  # a plain VACUUM removes dead rows by their place, evaluating nothing
        return _named(item.relation for item in node.rels or () if isinstance(item, ast.VacuumRelation))
    if isinstance(node, ast.ClusterStmt | ast.ReindexStmt):
        return _named([node.relation] if node.relation is not None else [])
    if isinstance(node, ast.IndexStmt):
        parts = [element.expr for element in node.indexParams or () if isinstance(element, ast.IndexElem)]
        expressions = tuple(part for part in (*parts, node.whereClause) if isinstance(part, ast.Node))
        return StoredCodeRun(expressions=expressions)
    if isinstance(node, ast.AlterTableStmt):
        return _altered(node)
    if isinstance(node, ast.CreateStmt) and isinstance(node.partbound, ast.PartitionBoundSpec):
        # A new partition's bounds are evaluated as it is made, and the parent's other rows (a default partition's)
        # meet its partition key.
        parents = _qualified(node.inhRelations or ())
        return StoredCodeRun(parents, expressions=_bounds(node.partbound), view_queries=False)
    if isinstance(node, ast.AlterDomainStmt):
        return _domain_altered(node)
    return StoredCodeRun()


def _bounds(bound: ast.PartitionBoundSpec) -> tuple[ast.Node, ...]:
    datums = (*(bound.listdatums or ()), *(bound.lowerdatums or ()), *(bound.upperdatums or ()))
    return tuple(datum for datum in datums if isinstance(datum, ast.Node))


def _domain_altered(node: ast.AlterDomainStmt) -> StoredCodeRun:
    """`ADD CONSTRAINT ... CHECK` evaluates the check for every value of the domain stored in any table, and
    `VALIDATE CONSTRAINT` an existing one: the stored code of every table, domains' checks included, counts."""
    if node.subtype == "C" and isinstance(node.def_, ast.Constraint):
        return StoredCodeRun(expressions=(node.def_,), view_queries=False)
    if node.subtype == "V":
        return StoredCodeRun(every_relation=True, view_queries=False)
    return StoredCodeRun()


# ALTER TABLE subcommands that rewrite the table (rebuilding its indexes) or check its rows against its constraints.
_REWRITING = frozenset(
    {
        AlterTableType.AT_AlterColumnType,
        AlterTableType.AT_ValidateConstraint,
        AlterTableType.AT_SetLogged,
        AlterTableType.AT_SetUnLogged,
        AlterTableType.AT_SetAccessMethod,
    }
)


def _altered(node: ast.AlterTableStmt) -> StoredCodeRun:
    commands = [command for command in node.cmds or () if isinstance(command, ast.AlterTableCmd)]
    added = (c.def_ for c in commands if isinstance(c.def_, ast.ColumnDef | ast.Constraint))
    expressions: tuple[ast.Node, ...] = tuple(added)
    relations: list[object] = []
    for command in commands:
        if command.subtype in _REWRITING or (
            command.subtype == AlterTableType.AT_AddColumn and _computes_values(command.def_)
        ):
            relations.append(node.relation)
        elif command.subtype == AlterTableType.AT_AttachPartition and isinstance(command.def_, ast.PartitionCmd):
            relations += [node.relation, command.def_.name]  # the partition's rows meet the table's partition key
            if isinstance(command.def_.bound, ast.PartitionBoundSpec):
                expressions += _bounds(command.def_.bound)
    return StoredCodeRun(_qualified(relations), expressions=expressions, view_queries=False)


def _computes_values(column: object) -> bool:
    """A new column with a default or a generated value: a volatile one rewrites the table."""
    return isinstance(column, ast.ColumnDef) and (
        column.raw_default is not None
        or any(isinstance(c, ast.Constraint) and c.raw_expr is not None for c in column.constraints or ())
    )


def _qualified(relations: Iterable[object]) -> tuple[QualifiedName, ...]:
    """The names of the relations among `relations` (range variables), each once."""
    return tuple(dict.fromkeys(QualifiedName.from_range_var(r) for r in relations if isinstance(r, ast.RangeVar)))


def _named(relations: Iterable[object]) -> StoredCodeRun:
    names = _qualified(relations)
    return StoredCodeRun(names, view_queries=False) if names else StoredCodeRun(every_relation=True, view_queries=False)
