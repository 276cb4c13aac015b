"""Everything a statement could change in a PostgreSQL cluster, read as superuser through a connection of its own.

Schemas and their objects, every row of every user table, sequences' positions, roles and memberships,
privileges (tables, schemas, databases, default privileges), settings (per role and database, and
ALTER SYSTEM's file), large objects, advisory locks, prepared transactions, databases and extensions.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

# name -> query; each result is compared as a sorted list of rows.
_CLUSTER_QUERIES = {
    "databases": "SELECT datname, datdba::regrole::text, datacl::text, datconnlimit FROM pg_database",
    "roles": (
        "SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, "
        "rolbypassrls, rolconnlimit, rolpassword, rolvaliduntil::text FROM pg_authid"
    ),
    "memberships": "SELECT roleid::regrole::text, member::regrole::text, admin_option FROM pg_auth_members",
    "role_settings": "SELECT setdatabase, setrole::regrole::text, setconfig::text FROM pg_db_role_setting",
    "system_settings": "SELECT sourcefile, name, setting FROM pg_file_settings WHERE sourcefile LIKE '%auto.conf'",
    "tablespaces": "SELECT spcname FROM pg_tablespace",
    "prepared_transactions": "SELECT gid FROM pg_prepared_xacts",
    "advisory_locks": "SELECT classid, objid, mode FROM pg_locks WHERE locktype = 'advisory'",
}

_DATABASE_QUERIES = {
    "schemas": "SELECT nspname, nspowner::regrole::text, nspacl::text FROM pg_namespace",
    "relations": (
        "SELECT n.nspname, c.relname, c.relkind::text, c.relowner::regrole::text, c.relacl::text, "
        "c.relrowsecurity, c.relhastriggers, c.relhasrules, obj_description(c.oid) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    ),
    "columns": (
        "SELECT a.attrelid::regclass::text, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE a.attnum > 0 AND NOT a.attisdropped AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    ),
    "functions": (
        "SELECT p.oid::regprocedure::text, p.provolatile, p.prosrc, p.proacl::text FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
    ),
    "triggers": "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal",
    "rules": "SELECT schemaname, tablename, rulename, definition FROM pg_rules",
    "policies": "SELECT schemaname, tablename, policyname FROM pg_policies",
    "views": (
        "SELECT schemaname, viewname, definition FROM pg_views "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
    ),
    "types": (
        "SELECT t.typname, t.typtype FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    ),
    "extensions": "SELECT extname, extversion FROM pg_extension",
    "default_privileges": (
        "SELECT defaclrole::regrole::text, defaclnamespace, defaclobjtype, defaclacl::text FROM pg_default_acl"
    ),
    "table_grants": (
        "SELECT grantor, grantee, table_schema, table_name, privilege_type FROM information_schema.role_table_grants"
    ),
    "sequences": "SELECT schemaname, sequencename, last_value FROM pg_sequences",
    "large_objects": "SELECT oid::bigint, lomowner::regrole::text FROM pg_largeobject_metadata",
    "publications": "SELECT pubname FROM pg_publication",
}

_USER_TABLES = (
    "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
    "AND n.nspname NOT LIKE 'pg_temp%'"
)


def _sorted(cursor: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in cursor.fetchall()), key=repr)


def take_snapshot(connection: psycopg.Connection[Any]) -> dict[str, Any]:
    """`connection` is a superuser autocommit connection to the database under test."""
    snapshot: dict[str, Any] = {}
    for name, query in {**_CLUSTER_QUERIES, **_DATABASE_QUERIES}.items():
        snapshot[name] = _sorted(connection.execute(query.encode()))
    rows = {}
    for schema, table in connection.execute(_USER_TABLES.encode()).fetchall():
        query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        rows[f"{schema}.{table}"] = _sorted(connection.execute(query))
    snapshot["rows"] = rows
    return snapshot
