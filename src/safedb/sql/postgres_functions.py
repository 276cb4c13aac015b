"""Which PostgreSQL functions a statement may call without asking, decided by name lists and `pg_proc`.

A function call is harmless in a read when PostgreSQL marks every candidate function of that name
immutable or stable (`pg_proc.provolatile` in `i`, `s`: such functions cannot write through SPI), or
when it is a built-in (`pg_catalog`) volatile function known to only read or wait (`KNOWN_SAFE_VOLATILE`).
Anything else asks: volatile functions, and names the catalog does not know. A dry run, which runs as the
writer, is stricter (`undone_by_rollback`): a user-defined function's label is not enforced. Known
side-effecting built-ins are named precisely (sequence, lock, function call), and functions that read or
write files on the database server are refused outright (`FILE_FUNCTIONS`). The catalog lookup itself
happens in the backend (`safedb.db.postgres.catalog`); this module only judges what it found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from safedb.errors import DeniedByPolicy
from safedb.sql.classification import Change, ChangeKind, DatabaseObject, ObjectType

# Built-in functions that read or write files on the database server, or run programs there.
FILE_FUNCTIONS = frozenset(
    {
        "pg_read_file", "pg_read_binary_file", "pg_read_file_old", "pg_stat_file", "pg_ls_dir", "pg_ls_logdir",
        "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir", "pg_ls_logicalmapdir", "pg_ls_logicalsnapdir",
        "pg_ls_replslotdir", "pg_ls_summariesdir", "lo_import", "lo_export", "pg_file_write", "pg_file_rename",
        "pg_file_unlink", "pg_file_sync", "pg_logdir_ls", "pg_current_logfile",
    }
)  # fmt: skip

# Built-in functions with effects beyond the statement (sessions, server, replication, sequences,
# large objects, locks, other servers, settings), whatever the catalog says about them.
SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_rotate_logfile_old",
        "pg_switch_wal", "pg_create_restore_point", "pg_promote", "pg_wal_replay_pause", "pg_wal_replay_resume",
        "pg_backup_start", "pg_backup_stop", "pg_start_backup", "pg_stop_backup", "pg_log_backend_memory_contexts",
        "pg_stat_clear_snapshot", "pg_stat_force_next_flush", "pg_export_snapshot", "pg_import_system_collations",
        "pg_extension_config_dump", "pg_nextoid", "pg_notify", "set_config", "setseed", "nextval", "setval",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
        # These run a query over relations named in a string, so the views' own functions are never seen.
        "table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema", "schema_to_xml", "schema_to_xmlschema",
        "schema_to_xml_and_xmlschema", "database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema",
        "ts_stat", "ts_rewrite", "brin_summarize_new_values", "brin_summarize_range", "brin_desummarize_range",
        "gin_clean_pending_list", "lowrite", "loread", "txid_current", "pg_current_xact_id",
        "pg_logical_emit_message", "pg_create_logical_replication_slot", "pg_create_physical_replication_slot",
        "pg_drop_replication_slot", "pg_copy_logical_replication_slot", "pg_copy_physical_replication_slot",
        "pg_replication_slot_advance", "pg_sync_replication_slots",
        # tablefunc's and xml2's: they run a query given as text (xpath_table every statement of it), whose
        # functions are never seen.
        "crosstab", "crosstab2", "crosstab3", "crosstab4", "connectby", "xpath_table",
        # isn's: labelled immutable, it switches the session to accepting invalid check digits, a setting that
        # neither a rollback nor DISCARD ALL resets (later calls on that pooled session would store such values).
        "isn_weak",
        # Foreign-data wrappers' validators, called with any options (postgres_fdw's connects to check them).
        "postgresql_fdw_validator", "postgres_fdw_validator", "file_fdw_validator",
        # Input functions called with a type's oid (labelled stable): `domain_in('5', 'd'::regtype, -1)` runs the
        # checks of domain `d` (any code), as do the others for a domain element, column or subtype, and PostgreSQL
        # 16's pg_input_* for a type named in a string; the type is an argument, so no cast of it is ever seen.
        "domain_in", "array_in", "record_in", "range_in", "multirange_in", "pg_input_is_valid", "pg_input_error_info",
        # Labelled stable, they load the partition key of a table given by oid, which folds its expressions (any
        # code labelled immutable); satisfies_hash_partition also calls the key's hash functions on its arguments.
        "satisfies_hash_partition", "pg_get_partition_constraintdef",
    }
)  # fmt: skip
# Functions whose work PostgreSQL cannot stop: neither the statement timeout nor `pg_terminate_backend()` acts until
# they return, so one call can keep a session and a CPU busy long after SafeDB gave up on it (only killing the
# process, which restarts the whole server, ends it sooner). libxml2 evaluates XPath (core's functions, `XMLEXISTS`,
# `XMLTABLE`, xml2's) in one go: a nested expression (`count(//*[count(//*) > 0])`) takes days on a modest document.
# pg_trgm's word similarity (its functions and the operators `<%`, `%>`, `<<%`, `%>>`, `<<->`...) compares the
# first string with every stretch of the second: minutes for strings of a few hundred kilobytes.
UNINTERRUPTIBLE_FUNCTIONS = {
    **dict.fromkeys(
        ("xpath", "xpath_exists", "xmlexists", "xmltable", "xpath_string", "xpath_number", "xpath_bool",
         "xpath_nodeset", "xpath_list"),
        "evaluates XPath, which the statement timeout cannot stop",
    ),
    **dict.fromkeys(
        ("word_similarity", "strict_word_similarity", "word_similarity_op", "word_similarity_commutator_op",
         "word_similarity_dist_op", "word_similarity_dist_commutator_op", "strict_word_similarity_op",
         "strict_word_similarity_commutator_op", "strict_word_similarity_dist_op",
         "strict_word_similarity_dist_commutator_op"),
        "compares words at length, which the statement timeout cannot stop",
    ),
}  # fmt: skip

# fmgr_: the languages' validators, labelled stable: validating an SQL function parses its body, which runs the
# checks of the domains its literals are cast to (any code), and the C one loads the function's library.
SIDE_EFFECT_PREFIXES = (
    "lo_", "dblink", "pg_advisory", "pg_try_advisory", "pg_stat_reset", "pg_replication_origin",
    "pg_logical_slot_", "binary_upgrade_", "fmgr_",
)  # fmt: skip

SEQUENCE_FUNCTIONS = frozenset({"nextval", "setval"})
LOCK_PREFIXES = ("pg_advisory", "pg_try_advisory")

# Built-in volatile functions that only read, measure or wait (waits are bounded by the statement timeout).
KNOWN_SAFE_VOLATILE = frozenset(
    {
        "clock_timestamp", "timeofday", "random", "random_normal", "gen_random_uuid", "uuidv4", "uuidv7",
        "pg_sleep", "pg_sleep_for", "pg_sleep_until", "currval", "lastval", "pg_sequence_last_value",
        "pg_database_size", "pg_indexes_size", "pg_relation_size", "pg_table_size", "pg_tablespace_size",
        "pg_total_relation_size", "pg_current_wal_lsn", "pg_current_wal_insert_lsn", "pg_current_wal_flush_lsn",
        "pg_is_in_recovery", "pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn", "pg_last_xact_replay_timestamp",
        "pg_blocking_pids", "pg_safe_snapshot_blocking_pids", "pg_lock_status", "pg_jit_available",
        "pg_notification_queue_usage", "pg_partition_ancestors", "pg_partition_tree", "txid_status",
        "pg_xact_status", "pg_xact_commit_timestamp", "pg_xact_commit_timestamp_origin", "pg_last_committed_xact",
        "pg_get_wal_replay_pause_state", "pg_is_wal_replay_paused", "pg_control_checkpoint", "pg_control_init",
        "pg_control_recovery", "pg_control_system", "pg_collation_actual_version",
        "pg_database_collation_actual_version", "pg_get_wal_resource_managers", "pg_stat_have_stats",
        "pg_prepared_xact", "pg_get_multixact_members", "pg_isolation_test_session_is_blocked",
        "pg_stat_get_xact_blocks_fetched", "pg_stat_get_xact_blocks_hit", "pg_stat_get_xact_function_calls",
        "pg_stat_get_xact_function_self_time", "pg_stat_get_xact_function_total_time", "pg_stat_get_xact_numscans",
        "pg_stat_get_xact_tuples_deleted", "pg_stat_get_xact_tuples_fetched", "pg_stat_get_xact_tuples_hot_updated",
        "pg_stat_get_xact_tuples_inserted", "pg_stat_get_xact_tuples_returned", "pg_stat_get_xact_tuples_updated",
        "pg_stat_get_recovery_prefetch",
    }
)  # fmt: skip

# Volatile functions of common extensions (pgcrypto, uuid-ossp) that only draw random numbers or read the
# clock; trusted as extension members (see `CatalogFunction.extension`).
KNOWN_SAFE_EXTENSION_VOLATILE = frozenset(
    {"gen_random_uuid", "gen_random_bytes", "gen_salt", "uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v4"}
)

BUILTIN_SCHEMA = "pg_catalog"
SYSTEM_SCHEMAS = frozenset({BUILTIN_SCHEMA, "information_schema"})
_SAFE_VOLATILITY = frozenset({"i", "s"})
_LABELS = {"i": "immutable", "s": "stable", "v": "volatile"}


@dataclass(frozen=True)
class FunctionRef:
    """A function the statement calls: `name(...)`, `schema.name(...)`, or attribute notation `(x).name`."""

    name: str
    schema: str | None = None
    attribute: bool = False
    """Only a candidate: `a.b` is a column unless a one-argument function `b` exists (attribute notation)."""
    argument: str | None = None
    """The first argument when it is a string literal (e.g. the sequence of `nextval('s')`)."""
    grammar: bool = False
    """Only a candidate: SQL/JSON syntax such as `json_scalar(...)`, a call only where a function of that name
    exists (on servers older than the parser's grammar)."""


@dataclass(frozen=True)
class CatalogFunction:
    """One `pg_proc` row, as the catalog query returns it."""

    schema: str
    name: str
    volatility: str
    on_search_path: bool
    takes_one_argument: bool
    via: str | None = None
    """For a function a referenced view or policy depends on: that relation's name."""
    operator: bool = False
    """The row is an operator named in the statement (`name` is its symbol, `schema` its function's), judged by its
    function."""
    extension: bool = False
    """The function was installed by an extension (a member, owned by a superuser): trusted by its label, as
    built-ins are (see `safedb.db.postgres.stored_code.EXTENSION_MEMBER`)."""
    oid: int = 0
    body: str | None = None
    """Why a user-defined function labelled immutable or stable is not harmless after all, to follow "it":
    what its body calls, or why it cannot be examined (`judged_by_body`); None when its body was found
    harmless, or was not examined."""
    definition: str | None = None
    """A fingerprint of a user-defined function's definition, for one that is not harmless: the question shows it,
    and an approval holds for it only (one replaced meanwhile runs other code under the same name)."""

    @property
    def judged_by_body(self) -> bool:
        """A user-defined function labelled immutable or stable: in a read, what its body calls decides."""
        return not trusted(self) and self.volatility in _SAFE_VOLATILITY

    @classmethod
    def from_stored_code(cls, schema: str, name: str, volatility: str, extension: bool) -> CatalogFunction:
        """A function reached through stored code (`safedb.db.postgres.stored_code`)."""
        return cls(schema, name, volatility, on_search_path=True, takes_one_argument=False, extension=extension)


def is_side_effecting(name: str) -> bool:
    return name in SIDE_EFFECT_FUNCTIONS or name in UNINTERRUPTIBLE_FUNCTIONS or name.startswith(SIDE_EFFECT_PREFIXES)


def _ref_order(ref: FunctionRef) -> tuple[str, str, bool, str, bool]:
    """The order of calls judged (and so of the changes found), where a schema or a literal argument may be None."""
    return ref.name, ref.schema or "", ref.attribute, ref.argument or "", ref.grammar


def check_file_access(name: str) -> None:
    """Raise DeniedByPolicy for functions that touch files on the database server."""
    if name in FILE_FUNCTIONS:
        raise DeniedByPolicy(
            f"{name}() reads or writes files on the database server, which SafeDB does not allow. Nothing was run."
        )


def known_change(ref: FunctionRef, via: str | None = None) -> Change | None:
    """The change a call of a known side-effecting built-in makes, by name alone; None for other names."""
    name = ref.name
    check_file_access(name)
    if name in SEQUENCE_FUNCTIONS:
        target = DatabaseObject(ObjectType.SEQUENCE, ref.argument or "?")
        return Change(ChangeKind.SEQUENCE, target, via, name)
    if name.startswith(LOCK_PREFIXES):
        return Change(ChangeKind.LOCK, DatabaseObject(ObjectType.ADVISORY_LOCK, name), via)
    if name.startswith("lo_") or name in ("lowrite", "loread"):
        return Change(ChangeKind.FUNCTION_CALL, DatabaseObject(ObjectType.LARGE_OBJECT, name), via)
    if (uninterruptible := UNINTERRUPTIBLE_FUNCTIONS.get(name)) is not None:
        return Change(ChangeKind.FUNCTION_CALL, DatabaseObject(ObjectType.FUNCTION, name), via, uninterruptible)
    if is_side_effecting(name):
        return Change(ChangeKind.FUNCTION_CALL, DatabaseObject(ObjectType.FUNCTION, name), via)
    return None


def _candidates(ref: FunctionRef, catalog: Iterable[CatalogFunction]) -> list[CatalogFunction]:
    found = []
    for row in catalog:
        if row.via is not None or row.operator or row.name != ref.name:
            continue
        if ref.schema is not None and row.schema != ref.schema:
            continue
        if ref.schema is None and not row.on_search_path:
            continue
        if ref.attribute and not row.takes_one_argument:
            continue
        found.append(row)
    return found


def harmless(row: CatalogFunction) -> bool:
    """Harmless in a read: labelled immutable or stable (PostgreSQL then refuses table writes from it; a
    user-defined one also needs a harmless body, see `CatalogFunction.body`), or a built-in or extension
    function known to only read or wait."""
    if row.body is not None:
        return False
    return (
        row.volatility in _SAFE_VOLATILITY
        or (row.schema == BUILTIN_SCHEMA and row.name in KNOWN_SAFE_VOLATILE)
        or (row.extension and row.name in KNOWN_SAFE_EXTENSION_VOLATILE)
    )


def trusted(row: CatalogFunction) -> bool:
    """Built-ins, and functions an extension installed (by a superuser, or trusted by one), are taken at
    their volatility label; a user-defined function's label is not enforced."""
    return row.schema in SYSTEM_SCHEMAS or row.extension


def undone_by_rollback(row: CatalogFunction) -> bool:
    """True for a trusted function (`trusted`) whose effects, if any, a rollback undoes, so that a dry run
    may call it."""
    return trusted(row) and harmless(row) and not is_side_effecting(row.name) and row.name not in FILE_FUNCTIONS


def planning_may_run(row: CatalogFunction) -> bool:
    """True when planning a statement that reaches `row` may run code a rollback does not undo. The planner
    calls functions labelled immutable or stable (to fold constants and estimate selectivity), and inlines
    SQL functions whatever their label, exposing what they call: so any untrusted function, and trusted
    ones with effects that are labelled immutable or stable. Trusted volatile ones (`nextval`) run only when
    the statement does."""
    if not trusted(row):
        return True
    return row.volatility in _SAFE_VOLATILITY and not undone_by_rollback(row)


def function_changes(refs: Iterable[FunctionRef], catalog: Iterable[CatalogFunction]) -> list[Change]:
    """Changes for the calls that are not known to be free of side effects.

    `catalog` holds every `pg_proc` row whose name was asked about, the operators named in the statement
    (`operator` set; any of that symbol counts), plus the functions the referenced views, row-security
    policies, domains and casts call (`via` set). Raises DeniedByPolicy for file access.
    """
    rows = list(catalog)
    changes: list[Change] = []
    for ref in sorted(set(refs), key=_ref_order):
        candidates = _candidates(ref, rows)
        if (ref.attribute or ref.grammar) and not candidates:
            continue  # a plain column reference, or SQL/JSON syntax
        if (change := known_change(ref)) is not None:
            changes.append(change)
            # A function of the built-in's name elsewhere may be the one PostgreSQL calls (a closer match of the
            # argument types wins over pg_catalog's): judged as any other.
            for row in candidates:
                if not trusted(row) and not harmless(row):
                    target = DatabaseObject(ObjectType.FUNCTION, ref.name, row.schema)
                    changes.append(Change(ChangeKind.FUNCTION_CALL, target, None, _why(row)))
        elif not candidates:
            detail = "not found in the catalog, so SafeDB cannot tell what it does"
            changes.append(Change(ChangeKind.UNKNOWN, DatabaseObject(ObjectType.FUNCTION, str(ref.name)), None, detail))
        else:
            # Each overload that may be the one called, with the fingerprint of its definition.
            target = DatabaseObject(ObjectType.FUNCTION, ref.name, ref.schema)
            changes += [
                Change(ChangeKind.FUNCTION_CALL, target, None, _why(row)) for row in candidates if not harmless(row)
            ]
    for row in rows:
        if row.operator and not harmless(row):
            target = DatabaseObject(ObjectType.FUNCTION, row.name, row.schema)
            changes.append(Change(ChangeKind.FUNCTION_CALL, target, None, f"an operator whose function is {_why(row)}"))
        if row.via is None:
            continue
        ref = FunctionRef(row.name, row.schema)
        # The row is the very function the view or policy calls: a built-in's name outside pg_catalog is not it.
        if row.schema == BUILTIN_SCHEMA and (change := known_change(ref, via=row.via)) is not None:
            changes.append(change)
        elif not harmless(row):
            target = DatabaseObject(ObjectType.FUNCTION, row.name, row.schema)
            changes.append(Change(ChangeKind.FUNCTION_CALL, target, row.via, _why(row)))
    return list(dict.fromkeys(changes))


def reached_functions(refs: Iterable[FunctionRef], catalog: Iterable[CatalogFunction]) -> list[CatalogFunction]:
    """The rows of `catalog` that a statement with calls `refs` may run (see `function_changes`)."""
    rows = list(catalog)
    reached = [row for ref in set(refs) for row in _candidates(ref, rows)]
    return reached + [row for row in rows if row.operator or row.via is not None]


def _why(row: CatalogFunction) -> str:
    why = "volatile" if row.body is None else f"labelled {_LABELS[row.volatility]}, but it {row.body}"
    return why if row.definition is None else f"{why}; definition {row.definition}"
