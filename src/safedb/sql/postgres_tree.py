"""Walking a pglast (libpg_query) parse tree: every node, names of relations and functions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pglast import ast


def walk(root: ast.Node) -> Iterator[ast.Node]:
    """Every node under `root` (itself included), depth first, through every attribute and list."""
    stack: list[object] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Node):
            yield item
            slots: dict[str, object] = getattr(type(item), "__slots__", {})
            stack.extend(getattr(item, name, None) for name in reversed(tuple(slots)))
        elif isinstance(item, tuple | list):
            stack.extend(reversed(item))


def strings(values: tuple[object, ...] | list[object] | None) -> list[str]:
    """The `sval`s of a name list such as `FuncCall.funcname` or `ColumnRef.fields` (A_Star is skipped)."""
    return [value.sval for value in values or () if isinstance(value, ast.String) and value.sval is not None]


@dataclass(frozen=True, order=True)
class QualifiedName:
    name: str
    schema: str | None = None

    @classmethod
    def from_list(cls, values: tuple[object, ...] | list[object] | None) -> QualifiedName:
        parts = strings(values)
        if not parts:
            return cls("?")
        return cls(parts[-1], parts[-2] if len(parts) > 1 else None)

    @classmethod
    def from_range_var(cls, relation: ast.RangeVar | None) -> QualifiedName:
        if relation is None:
            return cls("?")
        return cls(relation.relname or "?", relation.schemaname)

    def quoted(self) -> str:
        """As an SQL identifier, each part in double quotes (for `to_regclass`)."""
        parts = [part for part in (self.schema, self.name) if part is not None]
        return ".".join('"' + part.replace('"', '""') + '"' for part in parts)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def string_constant(node: object) -> str | None:
    """The text of a string literal (also through a cast such as `'s'::regclass`), else None."""
    if isinstance(node, ast.TypeCast):
        node = node.arg
    if isinstance(node, ast.A_Const) and isinstance(node.val, ast.String):
        return node.val.sval
    return None


def option_enabled(options: tuple[object, ...] | list[object] | None, name: str) -> bool:
    """True when a DefElem option list (EXPLAIN, VACUUM...) may switch `name` on: any mention of it that does
    not plainly switch it off. PostgreSQL takes the last of a repeated option (`ANALYZE false, ANALYZE true`
    analyzes), so every mention counts; a false alarm only asks a question."""
    return any(
        isinstance(option, ast.DefElem) and option.defname == name and not _switched_off(option.arg)
        for option in options or ()
    )


def _switched_off(value: object) -> bool:
    if isinstance(value, ast.Boolean):
        return not value.boolval
    if isinstance(value, ast.Integer):
        return value.ival == 0
    if isinstance(value, ast.String):
        return (value.sval or "").lower() in {"off", "false", "no", "0"}
    return False
