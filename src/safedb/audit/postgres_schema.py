"""The PostgreSQL audit schema: its tables, the triggers that keep it append-only, and how it is set up.

One schema (default `safedb_audit`) holds `audit_log`, the records (the same columns as the SQLite file),
and `audit_head`, one row with the last sequence number and hash, written in the same transaction as
every append. Triggers refuse UPDATE, DELETE and TRUNCATE of records, inserts that do not follow the last
record, and moving the head back or deleting it. Appends, and setting the schema up, serialize on a
transaction-scoped advisory lock whose key is derived from the schema name.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

import psycopg
from psycopg import sql

from safedb.audit.chain import GENESIS_HASH
from safedb.audit.rows import COLUMNS
from safedb.errors import DatabaseOpenError

logger = logging.getLogger(__name__)

Connection = psycopg.Connection[tuple[Any, ...]]

FORMAT_VERSION = 1
_COMMENT = "SafeDB audit log, format {}"
_COMMENT_PATTERN = re.compile(r"SafeDB audit log, format (\d+)")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

TRIGGERS = {
    "log": ("audit_log_no_update", "audit_log_no_delete", "audit_log_no_truncate", "audit_log_append_at_end"),
    "head": ("audit_head_forward_only", "audit_head_no_delete", "audit_head_no_truncate"),
}
"""The triggers of each table (`log`: audit_log, `head`: audit_head), by name."""

_TABLES = (
    """CREATE TABLE {log} (
        seq BIGINT PRIMARY KEY,
        time TEXT COLLATE "C" NOT NULL,
        decision TEXT NOT NULL,
        request_id TEXT NOT NULL,
        target TEXT NOT NULL,
        caller TEXT,
        sql TEXT NOT NULL,
        classification TEXT NOT NULL,
        changes TEXT NOT NULL,
        justification TEXT,
        environment TEXT,
        rows_affected BIGINT,
        error TEXT,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    )""",
    "CREATE INDEX audit_log_by_time ON {log} (time)",
    "CREATE INDEX audit_log_by_target ON {log} (target, seq)",
    "CREATE INDEX audit_log_by_request ON {log} (request_id)",
    "COMMENT ON TABLE {log} IS {comment}",
)

_HEAD = (
    """CREATE TABLE {head} (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        seq BIGINT NOT NULL,
        hash TEXT NOT NULL
    )""",
    "INSERT INTO {head} (id, seq, hash) VALUES (1, 0, {genesis})",
)

_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
        RAISE EXCEPTION USING MESSAGE = TG_ARGV[0], ERRCODE = 'insufficient_privilege';
        RETURN NULL;
    END $body$""",
    """CREATE OR REPLACE FUNCTION {schema}.append_at_end() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
        last_seq BIGINT;
        last_hash TEXT;
    BEGIN
        PERFORM pg_advisory_xact_lock({key});
        SELECT seq, hash INTO last_seq, last_hash FROM {log} ORDER BY seq DESC LIMIT 1;
        IF NEW.seq <= COALESCE(last_seq, 0) OR NEW.prev_hash IS DISTINCT FROM COALESCE(last_hash, {genesis}) THEN
            RAISE EXCEPTION USING
                MESSAGE = 'the audit log is append-only: a record must follow the last one',
                ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $body$""",
)

_TRIGGER_DEFINITIONS = {
    "audit_log_no_update": "BEFORE UPDATE ON {log} FOR EACH ROW EXECUTE FUNCTION {schema}.refuse("
    "'the audit log is append-only: records cannot be changed')",
    "audit_log_no_delete": "BEFORE DELETE ON {log} FOR EACH ROW EXECUTE FUNCTION {schema}.refuse("
    "'the audit log is append-only: records cannot be deleted')",
    "audit_log_no_truncate": "BEFORE TRUNCATE ON {log} FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse("
    "'the audit log is append-only: records cannot be deleted')",
    "audit_log_append_at_end": "BEFORE INSERT ON {log} FOR EACH ROW EXECUTE FUNCTION {schema}.append_at_end()",
    "audit_head_forward_only": "BEFORE UPDATE ON {head} FOR EACH ROW "
    "WHEN (NEW.seq <= OLD.seq OR NEW.id IS DISTINCT FROM OLD.id) "
    "EXECUTE FUNCTION {schema}.refuse('the audit head only moves forward')",
    "audit_head_no_delete": "BEFORE DELETE ON {head} FOR EACH ROW EXECUTE FUNCTION {schema}.refuse("
    "'the audit head cannot be deleted')",
    "audit_head_no_truncate": "BEFORE TRUNCATE ON {head} FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse("
    "'the audit head cannot be deleted')",
}


def checked_schema_name(schema: str) -> str:
    """`schema` if it is a plain lower-case PostgreSQL name; ValueError otherwise."""
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"{schema!r} is not a usable schema name (lower-case letters, digits and _, at most 63)")
    return schema


def lock_key(schema: str) -> int:
    """The advisory lock key (a signed 64-bit integer) that appends to `schema` serialize on."""
    digest = hashlib.sha256(f"safedb-audit:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def names(schema: str) -> dict[str, sql.Composable]:
    """The identifiers and literals the statements of this module are written with."""
    return {
        "schema": sql.Identifier(schema),
        "log": sql.Identifier(schema, "audit_log"),
        "head": sql.Identifier(schema, "audit_head"),
        "key": sql.Literal(lock_key(schema)),
        "genesis": sql.Literal(GENESIS_HASH),
        "comment": sql.Literal(_COMMENT.format(FORMAT_VERSION)),
    }


def ensure_schema(connection: Connection, schema: str, where: str) -> None:
    """Create what is missing of the audit schema (repairing dropped or disabled triggers), or check it.

    An audit schema that is complete is only inspected, so the appending role needs no CREATE privilege.
    Raises DatabaseOpenError when the schema holds something else, or cannot be created.
    """
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        tables = _tables(connection, schema)
        if tables and "audit_log" not in tables:
            raise DatabaseOpenError(
                f"Schema {schema} in {where} is not a SafeDB audit log (it has other tables and no audit_log); "
                "refusing to use it."
            )
        if tables and "audit_log" in tables:
            _check_format(connection, schema, where)
            if "audit_head" not in tables:
                raise DatabaseOpenError(
                    f"The audit log in schema {schema} of {where} has lost its head anchor table (it was tampered "
                    "with); run `safedb audit verify`. Nothing will be appended to it."
                )
            missing = _missing_triggers(connection, schema)
            if not missing:
                return
            logger.warning(
                "The audit log in schema %s of %s lacks working triggers (%s); restoring them. "
                "Run `safedb audit verify`.", schema, where, ", ".join(missing),
            )  # fmt: skip
        try:
            _create(connection, schema, tables)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise DatabaseOpenError(
                f"Cannot set up the audit schema {schema} in {where}: {exc.diag.message_primary}. Create it once "
                "as a role that may (`safedb audit init`), then grant this role what docs/audit.md lists."
            ) from None


def check_schema(connection: Connection, schema: str, where: str) -> None:
    """Check that `schema` holds an audit log SafeDB can read; DatabaseOpenError if not."""
    tables = _tables(connection, schema)
    if not tables:
        raise DatabaseOpenError(f"Audit log not found: {where} has no table {schema}.audit_log.")
    if "audit_log" not in tables:
        raise DatabaseOpenError(
            f"Schema {schema} in {where} is not a SafeDB audit log (it has other tables and no audit_log)."
        )
    _check_format(connection, schema, where)
    # Raises (permission denied) when this role may not read the records.
    connection.execute(sql.SQL("SELECT seq FROM {log} LIMIT 0").format(**names(schema)))


def _create(connection: Connection, schema: str, tables: set[str] | None) -> None:
    """Create the schema and tables that are missing, then (re)create the functions and triggers."""
    values = names(schema)

    def run(statement: str) -> None:
        connection.execute(sql.SQL(statement).format(**values))

    if tables is None:
        run("CREATE SCHEMA {schema}")
    if "audit_log" not in (tables or ()):
        for statement in _TABLES:
            run(statement)
    if "audit_head" not in (tables or ()):
        for statement in _HEAD:
            run(statement)
    for statement in _FUNCTIONS:
        run(statement)
    for table, triggers in TRIGGERS.items():
        for trigger in triggers:
            run(f"DROP TRIGGER IF EXISTS {trigger} ON {{{table}}}")
            run(f"CREATE TRIGGER {trigger} {_TRIGGER_DEFINITIONS[trigger]}")


def _tables(connection: Connection, schema: str) -> set[str] | None:
    """The tables (and views) of `schema`; None when there is no such schema."""
    if connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
        return None
    rows = connection.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
        (schema,),
    )
    return {row[0] for row in rows}


def _check_format(connection: Connection, schema: str, where: str) -> None:
    row = connection.execute(
        "SELECT obj_description(c.oid, 'pg_class'), "
        "ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'audit_log'",
        (schema,),
    ).fetchone()
    comment, columns = row if row is not None else (None, [])
    found = _COMMENT_PATTERN.fullmatch(comment or "")
    if found is None or tuple(columns) != COLUMNS:
        raise DatabaseOpenError(f"{schema}.audit_log in {where} is not a SafeDB audit log; refusing to use it.")
    version = int(found.group(1))
    if version > FORMAT_VERSION:
        raise DatabaseOpenError(
            f"The audit log {schema} in {where} was written by a newer SafeDB (audit format {version})."
        )


def _missing_triggers(connection: Connection, schema: str) -> list[str]:
    """Our triggers that are gone or disabled."""
    rows = connection.execute(
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND NOT t.tgisinternal AND t.tgenabled <> 'D'",
        (schema,),
    )
    working = {row[0] for row in rows}
    return [trigger for triggers in TRIGGERS.values() for trigger in triggers if trigger not in working]
