"""PostgreSQL utility statements (DDL, privileges, roles, settings, maintenance) as changes or refusals.

Every statement class here either becomes a list of changes (the statement asks) or raises a
`StatementRefused` (it never runs). A class not listed here becomes an UNKNOWN change: it asks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pglast import ast
from pglast.enums import AlterTableType, DropBehavior, ReindexObjectType, RoleSpecType, TransactionStmtKind
from pglast.enums import ObjectType as PgObjectType

from safedb.errors import DeniedByPolicy, StatementRefused, TemporaryObject, TransactionControl
from safedb.sql.classification import Change, ChangeKind, DatabaseObject, ObjectType
from safedb.sql.postgres_tree import QualifiedName, option_enabled, strings

OWNED_OBJECTS = "objects owned"
"""The detail of DROP OWNED BY's change: it drops every object the role owns, not the role."""
SESSION_ROLES = frozenset({"current_user", "current_role", "session_user"})
"""Role names that stand for the role the statement runs as (SafeDB's writer)."""

# What each ALTER TABLE action does, in the question's words (`{}` is the column, constraint or trigger);
# actions not listed are named after PostgreSQL's own name for them.
_ALTER_TABLE_ACTIONS = {
    AlterTableType.AT_AddColumn: "add column {}",
    AlterTableType.AT_DropColumn: "drop column {} and its data",
    AlterTableType.AT_AlterColumnType: "convert every value of column {} to a new type",
    AlterTableType.AT_ColumnDefault: "change the default of column {}",
    AlterTableType.AT_SetNotNull: "make column {} NOT NULL",
    AlterTableType.AT_DropNotNull: "let column {} be NULL",
    AlterTableType.AT_AddConstraint: "add a constraint",
    AlterTableType.AT_DropConstraint: "drop constraint {}",
    AlterTableType.AT_DisableTrig: "disable trigger {}",
    AlterTableType.AT_DisableTrigAll: "disable all its triggers",
    AlterTableType.AT_DisableTrigUser: "disable all its user triggers",
    AlterTableType.AT_DisableRule: "disable rule {}",
    AlterTableType.AT_DisableRowSecurity: "disable row level security",
    AlterTableType.AT_NoForceRowSecurity: "stop applying row level security to the table's owner",
    AlterTableType.AT_ChangeOwner: "change its owner",
    AlterTableType.AT_SetUnLogged: "make it unlogged (not crash-safe)",
}

_OBJECT_TYPES = {
    PgObjectType.OBJECT_TABLE: ObjectType.TABLE,
    PgObjectType.OBJECT_FOREIGN_TABLE: ObjectType.TABLE,
    PgObjectType.OBJECT_INDEX: ObjectType.INDEX,
    PgObjectType.OBJECT_VIEW: ObjectType.VIEW,
    PgObjectType.OBJECT_MATVIEW: ObjectType.MATERIALIZED_VIEW,
    PgObjectType.OBJECT_SEQUENCE: ObjectType.SEQUENCE,
    PgObjectType.OBJECT_SCHEMA: ObjectType.SCHEMA,
    PgObjectType.OBJECT_TRIGGER: ObjectType.TRIGGER,
    PgObjectType.OBJECT_FUNCTION: ObjectType.FUNCTION,
    PgObjectType.OBJECT_ROUTINE: ObjectType.FUNCTION,
    PgObjectType.OBJECT_AGGREGATE: ObjectType.FUNCTION,
    PgObjectType.OBJECT_PROCEDURE: ObjectType.PROCEDURE,
    PgObjectType.OBJECT_TYPE: ObjectType.TYPE,
    PgObjectType.OBJECT_DOMAIN: ObjectType.TYPE,
    PgObjectType.OBJECT_DATABASE: ObjectType.DATABASE,
    PgObjectType.OBJECT_ROLE: ObjectType.ROLE,
    PgObjectType.OBJECT_EXTENSION: ObjectType.EXTENSION,
}

# Session-level statements: SafeDB runs every call on a pooled connection in its own transaction, so
# none of these could mean anything, and several could outlive the call.
_SESSION_STATEMENTS = {
    ast.PrepareStmt: "PREPARE",
    ast.ExecuteStmt: "EXECUTE",
    ast.DeallocateStmt: "DEALLOCATE",
    ast.DeclareCursorStmt: "DECLARE",
    ast.FetchStmt: "FETCH/MOVE",
    ast.ClosePortalStmt: "CLOSE",
    ast.ListenStmt: "LISTEN",
    ast.UnlistenStmt: "UNLISTEN",
    ast.DiscardStmt: "DISCARD",
}

_TRANSACTION_VERBS = {
    TransactionStmtKind.TRANS_STMT_BEGIN: "BEGIN",
    TransactionStmtKind.TRANS_STMT_START: "START TRANSACTION",
    TransactionStmtKind.TRANS_STMT_COMMIT: "COMMIT",
    TransactionStmtKind.TRANS_STMT_ROLLBACK: "ROLLBACK",
    TransactionStmtKind.TRANS_STMT_SAVEPOINT: "SAVEPOINT",
    TransactionStmtKind.TRANS_STMT_RELEASE: "RELEASE SAVEPOINT",
    TransactionStmtKind.TRANS_STMT_ROLLBACK_TO: "ROLLBACK TO SAVEPOINT",
    TransactionStmtKind.TRANS_STMT_PREPARE: "PREPARE TRANSACTION",
    TransactionStmtKind.TRANS_STMT_COMMIT_PREPARED: "COMMIT PREPARED",
    TransactionStmtKind.TRANS_STMT_ROLLBACK_PREPARED: "ROLLBACK PREPARED",
}

# Settings that decide whether a transaction may write, or as whom it runs.
_GUARD_SETTINGS = frozenset(
    {"transaction_read_only", "default_transaction_read_only", "transaction_isolation",
     "default_transaction_isolation", "transaction_deferrable", "default_transaction_deferrable"}
)  # fmt: skip
_IDENTITY_SETTINGS = frozenset({"role", "session_authorization"})


def object_type(kind: object) -> ObjectType:
    try:
        return _OBJECT_TYPES.get(PgObjectType(kind), ObjectType.STATEMENT)  # type: ignore[arg-type]
    except ValueError:
        return ObjectType.STATEMENT


def _object_words(kind: object) -> str:
    try:
        return PgObjectType(kind).name.removeprefix("OBJECT_").replace("_", " ").lower()  # type: ignore[arg-type]
    except ValueError:
        return "object"


def object_name(item: object) -> QualifiedName:
    """The name of one object in a DROP, COMMENT or GRANT list, whatever node spells it."""
    if isinstance(item, tuple | list):
        return QualifiedName.from_list(item)
    if isinstance(item, ast.String):
        return QualifiedName(item.sval or "?")
    if isinstance(item, ast.ObjectWithArgs):
        return QualifiedName.from_list(item.objname)
    if isinstance(item, ast.TypeName):
        return QualifiedName.from_list(item.names)
    if isinstance(item, ast.RangeVar):
        return QualifiedName.from_range_var(item)
    if isinstance(item, ast.RoleSpec):
        return QualifiedName(item.rolename or _role_word(item))
    if isinstance(item, ast.AccessPriv):
        return QualifiedName(item.priv_name or "?")
    return QualifiedName("?")


def _role_word(role: ast.RoleSpec) -> str:
    """`current_user`, `session_user`, `current_role` or `public`."""
    return RoleSpecType(role.roletype).name.removeprefix("ROLESPEC_").lower() if role.roletype is not None else "?"


def target(kind: object, name: QualifiedName) -> DatabaseObject:
    """A DatabaseObject for a pglast object type; types SafeDB has no name for keep PostgreSQL's word."""
    ours = object_type(kind)
    if ours is ObjectType.STATEMENT:
        return DatabaseObject(ObjectType.STATEMENT, f"{_object_words(kind)} {name}")
    return DatabaseObject(ours, name.name, name.schema)


# RESTART IDENTITY: the table's identity and serial columns start again from their first value, so new rows take
# the ids of rows gone (which other tables, logs or caches may still name).
_SEQUENCES_RESTARTED = "and restart the sequences its columns own: new rows take old ids again"


def _relation(kind: ObjectType, relation: ast.RangeVar | None) -> DatabaseObject:
    name = QualifiedName.from_range_var(relation)
    return DatabaseObject(kind, name.name, name.schema)


def _roles(roles: tuple[object, ...] | None) -> list[DatabaseObject]:
    return [DatabaseObject(ObjectType.ROLE, object_name(role).name) for role in roles or ()] or [
        DatabaseObject(ObjectType.ROLE, "?")
    ]


def _alterations(node: ast.AlterTableStmt) -> str | None:
    """What an ALTER TABLE does, action by action (`drop column v and its data; add column w`)."""
    actions = []
    for command in node.cmds or ():
        if not isinstance(command, ast.AlterTableCmd) or command.subtype is None:
            continue
        words = _ALTER_TABLE_ACTIONS.get(command.subtype)
        if words is None:
            words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", command.subtype.name.removeprefix("AT_")).lower()
        column = command.def_ if isinstance(command.def_, ast.ColumnDef) else None
        name = command.name or (column.colname if column is not None else None) or "?"
        action = words.format(name) if "{}" in words else words
        if command.subtype is AlterTableType.AT_AlterColumnType and column is not None and column.raw_default:
            action = f"set every value of column {name} from a USING expression, as a new type"
        if command.behavior is DropBehavior.DROP_CASCADE:
            action += ", with CASCADE"
        actions.append(action)
    return "; ".join(actions) or None


def refuse_variable_set(node: ast.VariableSetStmt) -> None:
    """SET / RESET never run: they would change the session SafeDB's guards rely on, or vanish with the call."""
    name = (node.name or "").lower()
    if name in ("transaction", "session characteristics") or name in _GUARD_SETTINGS:
        raise TransactionControl(f"SET {node.name}" if node.name else "SET")
    if name in _IDENTITY_SETTINGS:
        raise DeniedByPolicy(
            f"SET {node.name.upper() if node.name else ''} would change the role SafeDB runs statements as; "
            "it is never allowed. Nothing was run."
        )
    raise DeniedByPolicy(
        "SET and RESET change settings of one database session, and SafeDB runs every call on a pooled "
        "connection in a transaction of its own, so the setting could not last and could weaken SafeDB's "
        "guards. Nothing was run. Use SHOW or current_setting() to read a setting."
    )


def refuse_session_statement(node: ast.Node) -> None:
    verb = _SESSION_STATEMENTS.get(type(node))
    if verb is not None:
        raise DeniedByPolicy(
            f"{verb} works on state kept in one database session (prepared statements, cursors, "
            "notification channels), and SafeDB does not keep sessions between calls. Nothing was run; send "
            "the statement itself instead."
        )
    if isinstance(node, ast.LoadStmt):
        raise DeniedByPolicy("LOAD loads a shared library into the database server; it is never allowed.")
    if isinstance(node, ast.TransactionStmt):
        raise TransactionControl(_TRANSACTION_VERBS.get(TransactionStmtKind(node.kind or 0), "transaction control"))
    if isinstance(node, ast.VariableSetStmt):
        refuse_variable_set(node)


def refuse_temporary(node: ast.Node) -> None:
    """Temporary relations live in one session, and each writer session is reset (`DISCARD ALL`) after a call."""
    relation = _created_relation(node)
    if relation is not None and (relation.relpersistence == "t" or temporary_schema(relation.schemaname)):
        raise TemporaryObject


def temporary_schema(schema: str | None) -> bool:
    """`pg_temp`, or a session's own `pg_temp_N`."""
    return (schema or "").startswith("pg_temp")


def _created_relation(node: ast.Node) -> ast.RangeVar | None:
    if isinstance(node, ast.CreateStmt):
        return node.relation
    if isinstance(node, ast.ViewStmt):
        return node.view
    if isinstance(node, ast.CreateSeqStmt):
        return node.sequence
    if isinstance(node, ast.CreateTableAsStmt):
        return node.into.rel if node.into is not None else None
    if isinstance(node, ast.SelectStmt):
        return node.intoClause.rel if node.intoClause is not None else None
    return None


def _drop(node: ast.DropStmt) -> list[Change]:
    return [Change(ChangeKind.DROP, target(node.removeType, object_name(item))) for item in node.objects or ()]


def _grant(node: ast.GrantStmt) -> list[Change]:
    kind = ChangeKind.GRANT if node.is_grant else ChangeKind.REVOKE
    privileges = ", ".join(object_name(p).name for p in node.privileges or ()) or "all privileges"
    grantees = ", ".join(object_name(g).name for g in node.grantees or ())
    detail = f"{privileges} {'to' if node.is_grant else 'from'} {grantees}"
    objects = [target(node.objtype, object_name(item)) for item in node.objects or ()]
    if not objects:
        objects = [DatabaseObject(ObjectType.STATEMENT, f"all {_object_words(node.objtype)}s")]
    return [Change(kind, obj, None, detail) for obj in objects]


def _grant_role(node: ast.GrantRoleStmt) -> list[Change]:
    kind = ChangeKind.GRANT if node.is_grant else ChangeKind.REVOKE
    granted = ", ".join(object_name(r).name for r in node.granted_roles or ())
    return [Change(kind, role, None, f"membership in {granted}") for role in _roles(node.grantee_roles)]


def _default_privileges(node: ast.AlterDefaultPrivilegesStmt) -> list[Change]:
    action = node.action
    kind = ChangeKind.GRANT if action is None or action.is_grant else ChangeKind.REVOKE
    words = _object_words(action.objtype) if action is not None else "object"
    return [Change(kind, DatabaseObject(ObjectType.STATEMENT, f"default privileges on {words}s"))]


def _alter_role(node: ast.AlterRoleStmt) -> list[Change]:
    options = ", ".join(option.defname or "?" for option in node.options or () if isinstance(option, ast.DefElem))
    return [Change(ChangeKind.ROLE, role, None, options or None) for role in _roles((node.role,))]


def _setting(setstmt: ast.VariableSetStmt | None) -> str:
    if setstmt is None:
        return "?"
    return (setstmt.name or "all").lower()


def _alter_system(node: ast.AlterSystemStmt) -> list[Change]:
    return [
        Change(ChangeKind.SETTING, DatabaseObject(ObjectType.SETTING, _setting(node.setstmt)), None, "ALTER SYSTEM")
    ]


def _reindex(node: ast.ReindexStmt) -> list[Change]:
    if node.relation is not None:
        kind = ObjectType.INDEX if node.kind == ReindexObjectType.REINDEX_OBJECT_INDEX else ObjectType.TABLE
        return [Change(ChangeKind.REINDEX, _relation(kind, node.relation))]
    return [Change(ChangeKind.REINDEX, DatabaseObject(ObjectType.DATABASE, node.name or "current"))]


def _vacuum(node: ast.VacuumStmt) -> list[Change]:
    kind = ChangeKind.VACUUM if node.is_vacuumcmd else ChangeKind.ANALYZE
    relations = [item.relation for item in node.rels or () if isinstance(item, ast.VacuumRelation)]
    if not relations:
        return [Change(kind, DatabaseObject(ObjectType.DATABASE, "current"))]
    return [Change(kind, _relation(ObjectType.TABLE, relation)) for relation in relations]


def _rename(node: ast.RenameStmt) -> list[Change]:
    if node.relation is not None:
        obj = target(node.renameType, QualifiedName.from_range_var(node.relation))
    else:
        obj = target(
            node.renameType, object_name(node.object) if node.object is not None else QualifiedName(node.subname or "?")
        )
    return [Change(ChangeKind.RENAME, obj, None, f"to {node.newname}")]


def _simple(kind: ChangeKind, make: Callable[[Any], DatabaseObject]) -> Callable[[Any], list[Change]]:
    return lambda node: [Change(kind, make(node))]


def _named(object_kind: ObjectType, attribute: str) -> Callable[[ast.Node], DatabaseObject]:
    def make(node: ast.Node) -> DatabaseObject:
        value = getattr(node, attribute, None)
        if isinstance(value, ast.RangeVar):
            return _relation(object_kind, value)
        if isinstance(value, tuple | list):
            name = QualifiedName.from_list(value)
            return DatabaseObject(object_kind, name.name, name.schema)
        if isinstance(value, ast.RoleSpec):
            return DatabaseObject(object_kind, object_name(value).name)
        return DatabaseObject(object_kind, str(value) if value is not None else "?")

    return make


def _statement(words: str) -> Callable[[ast.Node], DatabaseObject]:
    return lambda node: DatabaseObject(ObjectType.STATEMENT, words)


def _object_of(kind_attr: str, object_attr: str) -> Callable[[ast.Node], DatabaseObject]:
    return lambda node: target(getattr(node, kind_attr), object_name(getattr(node, object_attr, None)))


_HANDLERS: dict[type[ast.Node], Callable[[Any], list[Change]]] = {
    ast.DropStmt: _drop,
    ast.GrantStmt: _grant,
    ast.GrantRoleStmt: _grant_role,
    ast.AlterDefaultPrivilegesStmt: _default_privileges,
    ast.AlterRoleStmt: _alter_role,
    ast.AlterSystemStmt: _alter_system,
    ast.ReindexStmt: _reindex,
    ast.VacuumStmt: _vacuum,
    ast.RenameStmt: _rename,
    ast.CreateStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TABLE, "relation")),
    ast.CreateForeignTableStmt: _simple(ChangeKind.CREATE, lambda n: _named(ObjectType.TABLE, "relation")(n.base)),
    ast.ViewStmt: _simple(ChangeKind.CREATE, _named(ObjectType.VIEW, "view")),
    ast.IndexStmt: _simple(
        ChangeKind.CREATE,
        lambda n: DatabaseObject(ObjectType.INDEX, n.idxname or f"on {QualifiedName.from_range_var(n.relation)}"),
    ),
    ast.CreateSeqStmt: _simple(ChangeKind.CREATE, _named(ObjectType.SEQUENCE, "sequence")),
    ast.AlterSeqStmt: _simple(ChangeKind.ALTER, _named(ObjectType.SEQUENCE, "sequence")),
    ast.CreateSchemaStmt: _simple(ChangeKind.CREATE, _named(ObjectType.SCHEMA, "schemaname")),
    ast.CreateExtensionStmt: _simple(ChangeKind.CREATE, _named(ObjectType.EXTENSION, "extname")),
    ast.AlterExtensionStmt: _simple(ChangeKind.ALTER, _named(ObjectType.EXTENSION, "extname")),
    ast.AlterExtensionContentsStmt: _simple(ChangeKind.ALTER, _named(ObjectType.EXTENSION, "extname")),
    ast.CreateFunctionStmt: _simple(
        ChangeKind.CREATE,
        lambda n: _named(ObjectType.PROCEDURE if n.is_procedure else ObjectType.FUNCTION, "funcname")(n),
    ),
    ast.AlterFunctionStmt: _simple(
        ChangeKind.ALTER, lambda n: DatabaseObject(ObjectType.FUNCTION, object_name(n.func).name)
    ),
    ast.CreateTrigStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TRIGGER, "trigname")),
    ast.CreateEventTrigStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TRIGGER, "trigname")),
    ast.CreateEnumStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TYPE, "typeName")),
    ast.CreateRangeStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TYPE, "typeName")),
    ast.CompositeTypeStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TYPE, "typevar")),
    ast.CreateDomainStmt: _simple(ChangeKind.CREATE, _named(ObjectType.TYPE, "domainname")),
    ast.AlterEnumStmt: _simple(ChangeKind.ALTER, _named(ObjectType.TYPE, "typeName")),
    ast.AlterDomainStmt: _simple(ChangeKind.ALTER, _named(ObjectType.TYPE, "typeName")),
    ast.DefineStmt: _simple(ChangeKind.CREATE, lambda n: target(n.kind, QualifiedName.from_list(n.defnames))),
    ast.CreatedbStmt: _simple(ChangeKind.CREATE, _named(ObjectType.DATABASE, "dbname")),
    ast.DropdbStmt: _simple(ChangeKind.DROP, _named(ObjectType.DATABASE, "dbname")),
    ast.AlterDatabaseStmt: _simple(ChangeKind.ALTER, _named(ObjectType.DATABASE, "dbname")),
    ast.AlterDatabaseSetStmt: lambda n: [
        Change(ChangeKind.SETTING, DatabaseObject(ObjectType.DATABASE, n.dbname or "?"), None, _setting(n.setstmt))
    ],
    ast.AlterRoleSetStmt: lambda n: [
        Change(ChangeKind.SETTING, role, None, _setting(n.setstmt)) for role in _roles((n.role,))
    ],
    ast.CreateRoleStmt: _simple(ChangeKind.ROLE, _named(ObjectType.ROLE, "role")),
    ast.DropRoleStmt: lambda n: [Change(ChangeKind.DROP, role) for role in _roles(n.roles)],
    ast.ReassignOwnedStmt: lambda n: [
        Change(ChangeKind.ALTER, role, None, "reassign owned objects") for role in _roles(n.roles)
    ],
    ast.DropOwnedStmt: lambda n: [Change(ChangeKind.DROP, role, None, OWNED_OBJECTS) for role in _roles(n.roles)],
    ast.AlterTableStmt: lambda n: [
        Change(ChangeKind.ALTER, target(n.objtype, QualifiedName.from_range_var(n.relation)), None, _alterations(n))
    ],
    ast.AlterObjectSchemaStmt: lambda n: [
        Change(
            ChangeKind.ALTER,
            target(n.objectType, QualifiedName.from_range_var(n.relation) if n.relation else object_name(n.object)),
            None,
            f"set schema {n.newschema}",
        )
    ],
    ast.AlterOwnerStmt: lambda n: [
        Change(
            ChangeKind.ALTER,
            target(n.objectType, QualifiedName.from_range_var(n.relation) if n.relation else object_name(n.object)),
            None,
            f"owner to {object_name(n.newowner).name}",
        )
    ],
    ast.CommentStmt: _simple(ChangeKind.COMMENT, _object_of("objtype", "object")),
    ast.SecLabelStmt: _simple(ChangeKind.ALTER, _object_of("objtype", "object")),
    ast.RuleStmt: _simple(
        ChangeKind.CREATE,
        lambda n: DatabaseObject(
            ObjectType.STATEMENT, f"rule {n.rulename} on {QualifiedName.from_range_var(n.relation)}"
        ),
    ),
    ast.CreatePolicyStmt: _simple(
        ChangeKind.CREATE,
        lambda n: DatabaseObject(
            ObjectType.STATEMENT, f"policy {n.policy_name} on {QualifiedName.from_range_var(n.table)}"
        ),
    ),
    ast.AlterPolicyStmt: _simple(
        ChangeKind.ALTER,
        lambda n: DatabaseObject(
            ObjectType.STATEMENT, f"policy {n.policy_name} on {QualifiedName.from_range_var(n.table)}"
        ),
    ),
    ast.TruncateStmt: lambda n: [
        Change(
            ChangeKind.TRUNCATE, _relation(ObjectType.TABLE, r), detail=_SEQUENCES_RESTARTED if n.restart_seqs else None
        )
        for r in n.relations or ()
    ],
    ast.LockStmt: lambda n: [Change(ChangeKind.LOCK, _relation(ObjectType.TABLE, r)) for r in n.relations or ()],
    ast.NotifyStmt: _simple(ChangeKind.NOTIFY, _named(ObjectType.CHANNEL, "conditionname")),
    ast.RefreshMatViewStmt: _simple(ChangeKind.REFRESH, _named(ObjectType.MATERIALIZED_VIEW, "relation")),
    ast.ClusterStmt: lambda n: [
        Change(
            ChangeKind.CLUSTER,
            _relation(ObjectType.TABLE, n.relation) if n.relation else DatabaseObject(ObjectType.DATABASE, "current"),
        )
    ],
    ast.CheckPointStmt: _simple(ChangeKind.CHECKPOINT, _statement("the server")),
    ast.DoStmt: _simple(ChangeKind.DO, _statement("anonymous code block")),
    ast.CreateTableSpaceStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "tablespacename")),
    ast.DropTableSpaceStmt: _simple(ChangeKind.DROP, _named(ObjectType.STATEMENT, "tablespacename")),
    ast.CreateStatsStmt: _simple(ChangeKind.CREATE, _statement("statistics object")),
    ast.CreateCastStmt: _simple(ChangeKind.CREATE, _statement("cast")),
    ast.CreatePublicationStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "pubname")),
    ast.CreateSubscriptionStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "subname")),
    ast.CreateForeignServerStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "servername")),
    ast.CreateFdwStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "fdwname")),
    ast.CreateUserMappingStmt: _simple(ChangeKind.CREATE, _statement("user mapping")),
    ast.ImportForeignSchemaStmt: _simple(ChangeKind.CREATE, _named(ObjectType.SCHEMA, "local_schema")),
    ast.CreatePLangStmt: _simple(ChangeKind.CREATE, _named(ObjectType.STATEMENT, "plname")),
}


def utility_changes(node: ast.Node) -> list[Change]:
    """The changes a utility statement makes; refusals raise. Unknown statement classes ask as UNKNOWN."""
    refuse_session_statement(node)
    if isinstance(node, ast.CreateSchemaStmt) and node.schemaElts:
        # PostgreSQL runs each element as a statement of its own (a GRANT there may be on any table).
        raise StatementRefused(
            "CREATE SCHEMA with statements inside it is several statements; SafeDB judges and runs exactly one per "
            "call. Nothing was run: create the schema, then send each statement in its own call."
        )
    handler = _HANDLERS.get(type(node))
    if handler is None:
        detail = f"PostgreSQL {type(node).__name__}"
        return [Change(ChangeKind.UNKNOWN, DatabaseObject(ObjectType.STATEMENT, "the statement"), None, detail)]
    return handler(node) or [Change(ChangeKind.UNKNOWN, DatabaseObject(ObjectType.STATEMENT, "the statement"))]


def runs_outside_transaction(node: ast.Node) -> bool:
    """Statements PostgreSQL refuses inside a transaction block, or that manage transactions themselves."""
    if isinstance(node, ast.VacuumStmt):
        return bool(node.is_vacuumcmd)
    if isinstance(node, ast.IndexStmt | ast.DropStmt):
        return bool(node.concurrent)
    if isinstance(node, ast.ReindexStmt):
        return node.relation is None or option_enabled(node.params, "concurrently")
    if isinstance(node, ast.ClusterStmt):
        return node.relation is None
    if isinstance(node, ast.AlterDatabaseStmt):
        return any(isinstance(o, ast.DefElem) and o.defname == "tablespace" for o in node.options or ())
    if isinstance(node, ast.AlterTableStmt):  # DETACH PARTITION ... CONCURRENTLY
        parts = (command.def_ for command in node.cmds or () if isinstance(command, ast.AlterTableCmd))
        return any(isinstance(part, ast.PartitionCmd) and part.concurrent for part in parts)
    return isinstance(
        node,
        ast.CreatedbStmt
        | ast.DropdbStmt
        | ast.AlterSystemStmt
        | ast.CreateTableSpaceStmt
        | ast.DropTableSpaceStmt
        | ast.CreateSubscriptionStmt
        | ast.DropSubscriptionStmt
        | ast.AlterSubscriptionStmt
        | ast.CallStmt
        | ast.DoStmt,
    )


__all__ = [
    "object_name",
    "refuse_temporary",
    "runs_outside_transaction",
    "strings",
    "target",
    "temporary_schema",
    "utility_changes",
]
