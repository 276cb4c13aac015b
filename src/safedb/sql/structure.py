"""Statement structure as sqlglot sees it: the second opinion beside the database engine's own view."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from safedb.sql.classification import ChangeKind

logger = logging.getLogger(__name__)

# Statement forms that cannot change anything by themselves (the engine still has the last word).
_READ_FORMS: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values, exp.Pragma)
_READ_COMMANDS = frozenset({"EXPLAIN"})


@dataclass(frozen=True)
class StatementShape:
    """What a parser can say about a single statement's form."""

    root: str
    """sqlglot's name for the statement (`Select`, `Insert`, `Command:VACUUM`...), or `unparsed`."""
    read_form: bool
    insert_variant: ChangeKind | None = None
    """REPLACE or UPSERT when the statement is an insert of that flavour."""
    renames_table: bool = False
    into_path: str | None = None
    """The literal file name of `VACUUM ... INTO 'file'`, when it is a plain string."""


UNPARSED = StatementShape(root="unparsed", read_form=False)


def statement_shape(sql: str, dialect: str) -> StatementShape:
    """Parse one statement; anything sqlglot cannot parse into exactly one statement is `UNPARSED`."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError:
        return UNPARSED
    if len(statements) != 1:
        return UNPARSED
    root = statements[0]
    if isinstance(root, exp.Command):
        verb = str(root.this).upper()
        return StatementShape(
            root=f"Command:{verb}",
            read_form=verb in _READ_COMMANDS,
            insert_variant=ChangeKind.REPLACE if verb == "REPLACE" else None,
            into_path=_into_path(root, dialect) if verb == "VACUUM" else None,
        )
    return StatementShape(
        root=type(root).__name__,
        read_form=isinstance(root, _READ_FORMS),
        insert_variant=_insert_variant(root),
        renames_table=isinstance(root, exp.Alter)
        and any(isinstance(action, exp.AlterRename) for action in root.args.get("actions") or ()),
    )


def _insert_variant(root: exp.Expr) -> ChangeKind | None:
    if not isinstance(root, exp.Insert):
        return None
    if str(root.args.get("alternative") or "").upper() == "REPLACE":
        return ChangeKind.REPLACE
    conflict = root.args.get("conflict")
    if isinstance(conflict, exp.OnConflict) and "UPDATE" in str(conflict.args.get("action") or "").upper():
        return ChangeKind.UPSERT
    return None


def _into_path(command: exp.Command, dialect: str) -> str | None:
    rest = command.expression
    text = rest.this if isinstance(rest, exp.Literal) else str(rest or "")
    try:
        tokens = sqlglot.tokenize(text, read=dialect)
    except SqlglotError:
        return None
    for index, token in enumerate(tokens[:-1]):
        if token.token_type is TokenType.INTO:
            following = tokens[index + 1 :]
            if len(following) == 1 and following[0].token_type is TokenType.STRING:
                return following[0].text
            return None
    return None
