"""What every database backend offers, and the values it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeAlias

from safedb.sql.classification import Classification

Value: TypeAlias = bool | int | float | str | dict[str, str] | None
"""A JSON-ready cell value; a BLOB becomes `{"base64": "..."}`."""


@dataclass(frozen=True)
class QueryLimits:
    """Bounds on the work one call may do."""

    max_rows: int = 500
    max_bytes: int = 512 * 1024
    statement_timeout: float = 30.0
    """Seconds a statement may run before the database stops it."""
    preview_timeout: float = 5.0
    """Seconds the impact preview (a rolled-back dry run) may take."""

    @property
    def rows_to_read(self) -> int:
        """One row past the row cap, which tells whether a result was cut; at most the largest 64-bit integer, which
        a LIMIT can take."""
        return min(self.max_rows + 1, 2**63 - 1)


@dataclass(frozen=True)
class ResultSet:
    columns: tuple[str, ...]
    rows: tuple[tuple[Value, ...], ...]
    truncated: bool
    """True when rows were left out because of the row or byte cap."""


@dataclass(frozen=True)
class WriteOutcome:
    rows_affected: int | None
    """Rows the statement itself inserted, updated or deleted; None for statements without a row count."""
    returned: ResultSet | None = None
    """Rows from a RETURNING clause."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What an approval holds a statement to: the measurements of its impact preview that its question showed
    (`Impact.bounds`). Each is None when it was not measured, and then binds nothing."""

    rows: int | None = None
    """The rows the statement changes (`Impact.rows_affected`): exactly this many."""
    drops: tuple[str, ...] | None = None
    """What a DROP takes with it (`Impact.drops`): nothing more."""
    row_changes: tuple[str, ...] | None = None
    """The rows changed in each table, by kind (`Impact.row_changes`): exactly these."""


UNBOUND = Bounds()
"""No measurement to hold a statement to: a change run unasked, or one whose preview measured nothing."""


@dataclass(frozen=True)
class Impact:
    """What an approved statement would do, measured without changing anything."""

    lines: tuple[str, ...]
    rows_affected: int | None = None
    """Rows the statement would change, counted by a dry run (on SQLite with its triggers' rows; PostgreSQL
    makes a dry run only without triggers); None when not counted. An approval holds for exactly this many
    (`Database.write`)."""
    drops: tuple[str, ...] | None = None
    """What a dry run of a DROP showed it takes with it (PostgreSQL's `CASCADE`: `view public.v`...); None when no
    such dry run was made. An approval holds for nothing more (`Database.write`)."""
    row_changes: tuple[str, ...] | None = None
    """The rows the counted dry run changed in each table, by kind (PostgreSQL: `public.orders: 25 rows deleted`, a
    foreign key's cascade and a partition's rows included); None when not measured. An approval holds for exactly
    these (`Database.write`): a statement that can tell its dry run from its run (by a setting, a lock, the time it
    takes) could otherwise make up the count in other rows, or another table."""

    @property
    def bounds(self) -> Bounds:
        """What an approval of the statement, asked with this preview, holds it to."""
        return Bounds(self.rows_affected, self.drops, self.row_changes)


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str
    nullable: bool
    default: str | None
    primary_key: bool


@dataclass(frozen=True)
class TableInfo:
    name: str
    type: str
    """`table`, `view` or `virtual table`."""


@dataclass(frozen=True)
class TableDescription:
    name: str
    type: str
    columns: tuple[ColumnInfo, ...]
    row_count: int | None
    sql: str | None
    row_count_estimated: bool = False
    """`row_count` is the planner's estimate, not a count: counting would have taken too long, or would have
    run code of the table's that a read may not (PostgreSQL)."""


class Database(Protocol):
    """A database SafeDB stands in front of. Every method is safe to call from the event loop."""

    @property
    def label(self) -> str:
        """Short human description, e.g. `sqlite demo.db`."""
        ...

    async def classify(self, sql: str) -> Classification:
        """What the statement would do, without doing it."""
        ...

    async def read(self, classification: Classification) -> ResultSet:
        """Run a read-only statement where the database itself refuses writes."""
        ...

    async def preview(self, classification: Classification) -> Impact:
        """Measure the effect of a changing statement without keeping it."""
        ...

    async def write(
        self,
        approved: Classification,
        bounds: Bounds = UNBOUND,
    ) -> WriteOutcome:
        """Run an approved statement in its own transaction; it must still do only what was approved, and what its
        question showed (`bounds`).

        Raises:
            RowCountChanged: the statement affected another number of rows than `bounds.rows`; it was rolled back.
            ChangedSinceQuestion: among others, a DROP would take more with it than `bounds.drops`, or the
                statement changed other rows than `bounds.row_changes`; it was rolled back.
        """
        ...

    async def list_tables(self) -> list[TableInfo]: ...

    async def describe_table(self, name: str) -> TableDescription | None:
        """None when there is no table or view of that name."""
        ...

    async def aclose(self) -> None: ...
