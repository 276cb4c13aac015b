"""SQLite connections with their guards: read-only readers, one writer, time limits.

Readers, and the inspectors that compile statements to classify them, are opened read-only
(`mode=ro`) with `PRAGMA query_only`, so SQLite itself refuses to write through them, and an
authorizer refuses what read-only mode does not cover (pragmas that change settings, ATTACH,
transaction control, extension loading). The writer runs only approved statements, and only what
was approved: its authorizer lets through the approved statement's own authorizer events and plain
reads, nothing else.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path

from safedb.errors import DatabaseOpenError, QueryFailed, QueryTimeout
from safedb.sql.sqlite_actions import Action, AuthorizerEvent, is_read_event

# How long a connection waits for another one's lock before SQLite reports the database as locked.
# Connections used on the event loop's thread never wait: they must not hold it up.
_BUSY_TIMEOUT = 5.0

# How many of the statements it prepared a connection keeps, compiled, to run again without compiling them: on the
# event loop's connections, which run statements of up to INLINE_STATEMENT_CHARS only; none on the others, whose
# work takes long enough that compiling again costs little. Kept statements hold their programs in SQLite's memory,
# which counts against MAX_SQLITE_HEAP_BYTES: with Python's default of 128 on every connection, seventy reads of
# 90,000 characters (or five of 900,000) filled it, and every later statement but the shortest failed for want of
# memory, for good.
_KEPT_STATEMENTS = 32
KEPT_PROGRAM_INSTRUCTIONS = 20_000
"""The longest program a statement may compile to and still run on the event loop's connections, which keep it
compiled (about 24 bytes an instruction: at most some 16 MB for each connection's kept statements). A statement
past it runs in worker threads: a 25-character read of a generated column defined over others, each over the one
before, compiles to millions of instructions."""

# How many SQLite virtual-machine steps run between two checks of the time limit. Each check is Python
# code, so in a worker thread it must take the GIL from the busy event loop: checking too often slows
# a long statement many times over. On the event loop's thread, checks are cheap and keep its short
# budget tight.
_PROGRESS_STEPS = 100_000
_PROGRESS_STEPS_ON_EVENT_LOOP = 1_000

# The largest string or BLOB SQLite may build or read (SQLite's own default is 1 GB). One call such as
# `printf('%.*c', N, 'x')` or `zeroblob(N)` is a single step of SQLite's program: no time limit can stop it
# halfway, so its size bounds how long it runs (some 7 ns a byte) and how much memory it takes.
MAX_VALUE_BYTES = 64 * 1024 * 1024

# The same on the event loop's own connections: there a statement of short steps only runs, but one row may
# hold many steps that no time limit stops in between (`length(s || s), length(s || s), ...`), so each must be
# quick. Work that needs larger values fails there and runs again in a worker thread.
MAX_VALUE_BYTES_ON_EVENT_LOOP = 1024 * 1024

# The largest string or BLOB a connection may build once its call has interrupted it. SQLite looks at an interrupt
# only where its program jumps: a row of many calls that each build a large value (`length(randomblob(N)) + ...`)
# went on for its whole length after its call had ended (34 s for 200 calls), holding the connection. Past this
# limit, the next such call fails at once.
_INTERRUPTED_VALUE_BYTES = 1

# The most memory SQLite may hold at once in this process, all connections together: a statement that
# needs more (wide rows of large values) fails instead of exhausting the machine's memory.
MAX_SQLITE_HEAP_BYTES = 512 * 1024 * 1024

# Python's sqlite3 raises MemoryError, not an sqlite3.Error, when SQLite runs out of memory (past
# MAX_SQLITE_HEAP_BYTES, for instance): what SafeDB reports for it.
OUT_OF_MEMORY = "out of memory"

_ALWAYS_REFUSED_ON_READERS = frozenset(
    {Action.ATTACH, Action.DETACH, Action.TRANSACTION, Action.SAVEPOINT, Action.PRAGMA, Action.FUNCTION}
)

# The connections the current call holds, so that the call's time limit or its cancellation can interrupt
# SQLite (see `SqliteDatabase._in_thread`). Worker threads run in a copy of the caller's context and share
# the list.
HELD_CONNECTIONS: ContextVar[list[GuardedConnection] | None] = ContextVar("held_connections", default=None)


class CallTime:
    """When the current call ends: its time limit, counted from its start, or sooner if it ends sooner (see
    `SqliteDatabase._in_thread`). Work waits for a connection no longer than that, and runs no longer: work
    left behind by a call that has ended must not take a connection later and run a whole time limit of its
    own, while the calls that came after it wait for that connection."""

    def __init__(self, ends: float = math.inf) -> None:
        self.ends = ends

    def end_now(self) -> None:
        self.ends = min(self.ends, time.monotonic())

    def left(self) -> float | None:
        """Seconds left (0 once past), or None when the call has no time limit."""
        return None if math.isinf(self.ends) else max(0.0, self.ends - time.monotonic())


# The current call's time, shared with its worker thread like HELD_CONNECTIONS; None: no time limit.
CALL_TIME: ContextVar[CallTime | None] = ContextVar("call_time", default=None)
_NO_CALL = CallTime()


def current_call() -> CallTime:
    """The current call's time (one without a limit outside `SqliteDatabase._in_thread`)."""
    return CALL_TIME.get() or _NO_CALL


Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


def quote_identifier(name: str) -> str:
    """An SQLite identifier in double quotes, for names taken from the catalog."""
    return '"' + name.replace('"', '""') + '"'


def reader_authorizer(code: int, arg1: str | None, arg2: str | None, schema: str | None, source: str | None) -> int:
    """Refuse, on a reader, what read-only mode would not stop by itself."""
    event = AuthorizerEvent(code, arg1, arg2, schema, source)
    if code in _ALWAYS_REFUSED_ON_READERS and not is_read_event(event):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class AuthorizerNotingConnection(sqlite3.Connection):
    """A connection that notes when its authorizer is set: setting one makes SQLite discard every statement the
    connection has prepared, so `GuardedConnection` sets its own back only when the work set another."""

    authorizer_changed = False

    def set_authorizer(self, authorizer_callback: Authorizer | None, /) -> None:
        super().set_authorizer(authorizer_callback)
        self.authorizer_changed = True


class GuardedConnection:
    """One sqlite3 connection, used by one thread at a time, with a per-call time limit.

    The connection's authorizer is `authorizer` outside sessions: a session whose work set another sets it back.
    """

    def __init__(
        self,
        connection: AuthorizerNotingConnection,
        authorizer: Authorizer | None,
        *,
        progress_steps: int = _PROGRESS_STEPS,
    ) -> None:
        self.connection = connection
        self.default_authorizer = authorizer
        self._lock = threading.Lock()
        self._holder: list[GuardedConnection] | None = None
        self._holder_lock = threading.Lock()
        self._deadline = float("inf")
        self._call = _NO_CALL
        self._progress_steps = progress_steps
        self._value_bytes = connection.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        self._interrupted = False
        connection.set_authorizer(authorizer)
        connection.authorizer_changed = False

    def _past_deadline(self) -> bool:
        # The call's end is read live: a call that ends early (cancelled) stops its work at the next check.
        now = time.monotonic()
        return now > self._deadline or now > self._call.ends

    @contextmanager
    def session(self, seconds: float) -> Iterator[sqlite3.Connection]:
        """Hold the connection for one unit of work; past `seconds`, SQLite stops and QueryTimeout is raised.

        Work that stops inside a transaction (even while rolling it back) is rolled back here: a session
        never leaves a transaction open, nor the write lock held.
        """
        call = current_call()
        left = call.left()
        if not self._lock.acquire(timeout=-1 if left is None else left):
            raise QueryTimeout(seconds)
        try:
            if call.left() == 0:
                raise QueryTimeout(seconds)
            self._deadline = time.monotonic() + seconds
            self._call = call
            self.connection.set_progress_handler(self._past_deadline, self._progress_steps)
            held = HELD_CONNECTIONS.get()
            if held is not None:
                held.append(self)
            with self._holder_lock:
                self._holder = held
            try:
                yield self.connection
            except sqlite3.Error as exc:
                if str(exc) == "interrupted" or self._interrupted:  # stopped by its value limit, once interrupted
                    raise QueryTimeout(seconds) from exc
                raise QueryFailed(f"The database reported an error: {exc}") from exc
            except MemoryError as exc:
                raise QueryFailed(
                    f"The database reported an error: {OUT_OF_MEMORY} (SafeDB lets SQLite hold "
                    f"{MAX_SQLITE_HEAP_BYTES // 2**20} MiB at most, all statements together: a LIMIT, a narrower "
                    "WHERE or an index keeps a sort or grouping within it)."
                ) from exc
            finally:
                with self._holder_lock:
                    self._holder = None
                if self._interrupted:
                    self.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self._value_bytes)
                    self._interrupted = False
                self._deadline = float("inf")
                self._call = _NO_CALL
                roll_back(self.connection)
                if self.connection.authorizer_changed:
                    self.connection.set_authorizer(self.default_authorizer)
                    self.connection.authorizer_changed = False
        finally:
            self._lock.release()

    def interrupt_for(self, holder: list[GuardedConnection]) -> None:
        """Stop SQLite's work on this connection (at its next jump, or the next value it builds: see
        `_INTERRUPTED_VALUE_BYTES`) if the call that `holder` stands for still holds it; never the work of a call that
        took the connection since."""
        with self._holder_lock:
            if self._holder is holder:
                self._interrupted = True
                self.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _INTERRUPTED_VALUE_BYTES)
                self.connection.interrupt()

    def close(self) -> None:
        with self._lock:
            self.connection.close()


# Errors that come from the moment, not from the statement: another connection's lock, the time limit.
_STOPPED_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT})


def was_stopped(exc: sqlite3.Error) -> bool:
    """Whether SQLite stopped the work for a reason outside the statement: the time limit, or a lock."""
    primary_code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return str(exc) == "interrupted" or primary_code in _STOPPED_CODES


def drain(cursor: sqlite3.Cursor) -> None:
    """Run the statement of `cursor` to its end, one row at a time, throwing its rows away: Python's copies of
    the rows a change RETURNs are outside SQLite's heap limit, and each may hold values of up to
    `MAX_VALUE_BYTES` (`fetchall()`, or even `fetchmany(256)`, held them all at once)."""
    for _ in cursor:
        pass


def commit(connection: sqlite3.Connection) -> None:
    """COMMIT without the session's time limit: SQLite may report a commit stopped halfway as failed after
    it took effect. The next session sets the limit again."""
    connection.set_progress_handler(None, 0)
    connection.execute("COMMIT")


def roll_back(connection: sqlite3.Connection) -> None:
    """ROLLBACK the open transaction, if any (an interrupted statement may have ended it already), without
    the session's time limit: a rollback stopped halfway keeps the write lock."""
    if connection.in_transaction:
        connection.set_progress_handler(None, 0)
        connection.execute("ROLLBACK")


@contextmanager
def dry_run_in_memory(connection: sqlite3.Connection) -> Iterator[None]:
    """Within the block, a writer keeps what a dry run changes in memory, within MAX_SQLITE_HEAP_BYTES, instead of
    in files, which no limit counts (an approved statement may need them: CREATE INDEX on a large table sorts in
    them, a large change spills its pages):

    - the rows a statement sorts, groups or materializes past its page cache, as readers always do (see
      `_open_read_only`), instead of in temporary files;
    - the pages it changes (`cache_spill`), which SQLite otherwise writes to the database's -wal file once the page
      cache is full: an INSERT of large blobs left a -wal file of 2 GB after its dry run's rollback, which stays
      until a checkpoint. A rollback journal still gets the pages' old content, at most as much as memory holds,
      and goes with the rollback.

    Call outside any transaction: SQLite refuses to change where temporary files go within one."""
    (temp_store,) = connection.execute("PRAGMA temp_store").fetchone()
    (cache_spill,) = connection.execute("PRAGMA cache_spill").fetchone()
    connection.execute("PRAGMA temp_store = MEMORY")
    connection.execute("PRAGMA cache_spill = OFF")
    try:
        yield
    finally:
        # Left in memory if this fails too: statements that need more then fail, and nothing else changes.
        with suppress(sqlite3.Error):
            connection.execute(f"PRAGMA temp_store = {int(temp_store)}")
            connection.execute(f"PRAGMA cache_spill = {int(cache_spill)}")


def open_reader(path: Path, *, on_event_loop: bool = False) -> GuardedConnection:
    """A connection that runs read-only statements, in worker threads or `on_event_loop`."""
    return _open_read_only(path, on_event_loop)


def open_inspector(path: Path, *, on_event_loop: bool = False) -> GuardedConnection:
    """A read-only connection for compiling statements under a recording authorizer (see `inspector`). It keeps no
    compiled statement, on the event loop's thread either: it compiles statements nobody has looked at yet (their
    classifications are remembered instead), one of which may compile to millions of instructions."""
    return _open_read_only(path, on_event_loop, keep_statements=False)


def _open_read_only(path: Path, on_event_loop: bool, *, keep_statements: bool = True) -> GuardedConnection:
    uri = path.resolve().as_uri() + "?mode=ro"
    connection = _connect(uri, uri=True, on_event_loop=on_event_loop, keep_statements=keep_statements)
    connection.execute("PRAGMA query_only = ON")
    # Rows a read sorts, groups or materializes past the page cache go to temporary files by default, which
    # MAX_SQLITE_HEAP_BYTES does not count: an endless sort wrote gigabytes of them within its time limit (on a
    # `/tmp` in memory, memory). Kept in memory, they fail the read past that limit instead.
    connection.execute("PRAGMA temp_store = MEMORY")
    steps = _limits_for(connection, on_event_loop)
    return GuardedConnection(connection, reader_authorizer, progress_steps=steps)


def open_writer(path: Path, *, on_event_loop: bool = False) -> GuardedConnection:
    """A read-write connection for approved statements and their dry runs, in worker threads or
    `on_event_loop`."""
    connection = _connect(str(path), uri=False, on_event_loop=on_event_loop)
    return GuardedConnection(connection, None, progress_steps=_limits_for(connection, on_event_loop))


def _limits_for(connection: sqlite3.Connection, on_event_loop: bool) -> int:
    """Set the connection's limits for where it runs (on the event loop: `MAX_VALUE_BYTES_ON_EVENT_LOOP`), and
    return how many steps of SQLite's program pass between its checks of the time limit."""
    if not on_event_loop:
        return _PROGRESS_STEPS
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES_ON_EVENT_LOOP)
    return _PROGRESS_STEPS_ON_EVENT_LOOP


def check_database_file(path: Path) -> None:
    """Raise DatabaseOpenError unless `path` is an existing, readable SQLite database."""
    if not path.exists():
        raise DatabaseOpenError(f"Database file not found: {path}")
    if not path.is_file():
        raise DatabaseOpenError(f"Not a file: {path}")
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True)
        try:
            connection.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        raise DatabaseOpenError(f"Cannot open {path} as an SQLite database: {exc}") from exc


def _connect(
    target: str, *, uri: bool, on_event_loop: bool, keep_statements: bool = True
) -> AuthorizerNotingConnection:
    """A connection with SafeDB's limits, for worker threads or `on_event_loop` (see `_KEPT_STATEMENTS`; none kept
    without `keep_statements`)."""
    try:
        connection = sqlite3.connect(
            target,
            uri=uri,
            timeout=0 if on_event_loop else _BUSY_TIMEOUT,
            check_same_thread=False,
            isolation_level=None,
            factory=AuthorizerNotingConnection,
            cached_statements=_KEPT_STATEMENTS if on_event_loop and keep_statements else 0,
        )
    except sqlite3.Error as exc:
        raise DatabaseOpenError(f"Cannot open the database: {exc}") from exc
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.text_factory = decode_text
    connection.execute(f"PRAGMA hard_heap_limit = {MAX_SQLITE_HEAP_BYTES}")
    # `fts3_tokenizer(name, pointer)` makes SQLite call whatever native address it is given, and what it
    # registers outlives a rollback. The deny list refuses it in statements, but a call stored in the schema
    # (a CHECK constraint, a default, an index expression) runs unseen by the authorizer, even in a dry
    # run: so on every connection the function is replaced by one that refuses.
    for arguments in (1, 2):
        connection.create_function("fts3_tokenizer", arguments, _refuse_native_pointers)
    return connection


def decode_text(data: bytes) -> str:
    """TEXT values as str, with U+FFFD for bytes that are not UTF-8. SQLite stores whatever bytes a program
    gave it as TEXT, and Python's own decoding fails the whole statement on the first such value (a read, a
    dry run, the rows an approved change returns); so does EXPLAIN on a BLOB literal that is not UTF-8."""
    return data.decode("utf-8", "replace")


def _refuse_native_pointers(*_: object) -> None:
    raise sqlite3.OperationalError("fts3_tokenizer() is disabled: it passes native code addresses")
