"""The SQLite corpus: cases from data files, the fixture database, and snapshots taken apart from the server.

A case lives in `tests/corpus/sqlite/*.toml` as a `[[case]]` table:

    name            unique across the corpus; the pytest id
    sql             the statement sent to execute_query, as it is
    expect          "run"    runs at once: no question, no error
                    "ask"    asks through elicitation; declined, nothing changes
                    "refuse" refused with an error, no question, nothing changes
    kinds           (ask) the change kinds the question names, exactly (values of ChangeKind)
    rows            (run) the exact rows the tool returns
    error_contains  (refuse) text the error contains, compared case-insensitively
    accept_check    (ask) false when approving the statement proves nothing (default true)
    accept_visible  (ask) false when the approved statement changes nothing a snapshot sees (default true)
    notes           free text for people
"""

from __future__ import annotations

import re
import sqlite3
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_types import CallToolResult, ElicitRequestFormParams

from safedb.audit import SqliteAuditStore
from safedb.sql.classification import ChangeKind
from tests.helpers import Responder, audit_decisions

CORPUS_DIR = Path(__file__).parent / "sqlite"
FIXTURE_SQL = Path(__file__).parent / "fixture.sql"

EXPECTATIONS = frozenset({"run", "ask", "refuse"})
_SEPARATORS = "; \t\n"
_FIELDS = frozenset(
    {"name", "sql", "expect", "kinds", "rows", "error_contains", "accept_check", "accept_visible", "notes"}
)
_FIELDS_BY_EXPECTATION = {
    "run": frozenset({"rows"}),
    "ask": frozenset({"kinds", "accept_check", "accept_visible"}),
    "refuse": frozenset({"error_contains"}),
}


@dataclass(frozen=True)
class Case:
    name: str
    sql: str
    expect: str
    theme: str
    kinds: frozenset[ChangeKind] | None = None
    rows: list[list[Any]] | None = None
    error_contains: str | None = None
    accept_check: bool = True
    accept_visible: bool = True


class CorpusError(ValueError):
    """A data file that does not describe valid cases."""


def load_cases(directory: Path = CORPUS_DIR) -> list[Case]:
    """Every case of every data file, in file order; raises CorpusError on a malformed case."""
    cases = []
    for path in sorted(directory.glob("*.toml")):
        with path.open("rb") as handle:
            document = tomllib.load(handle)
        if set(document) != {"case"}:
            raise CorpusError(f"{path.name}: only [[case]] tables are allowed, found {sorted(document)}")
        cases.extend(_case(path.stem, raw) for raw in document["case"])
    return cases


def _case(theme: str, raw: dict[str, Any]) -> Case:
    name = raw.get("name")
    where = f"{theme}.toml case {name!r}"
    unknown = set(raw) - _FIELDS
    if unknown:
        raise CorpusError(f"{where}: unknown fields {sorted(unknown)}")
    if not isinstance(name, str) or not name.isidentifier():
        raise CorpusError(f"{where}: name must be a word made of letters, digits and underscores")
    if not isinstance(raw.get("sql"), str):
        raise CorpusError(f"{where}: sql must be a string")
    expect = raw.get("expect")
    if expect not in EXPECTATIONS:
        raise CorpusError(f"{where}: expect must be one of {sorted(EXPECTATIONS)}, not {expect!r}")
    misplaced = (set(raw) & (_FIELDS - {"name", "sql", "expect", "notes"})) - _FIELDS_BY_EXPECTATION[expect]
    if misplaced:
        raise CorpusError(f"{where}: fields {sorted(misplaced)} do not apply to expect = {expect!r}")
    kinds = raw.get("kinds")
    try:
        kind_set = None if kinds is None else frozenset(ChangeKind(kind) for kind in kinds)
    except ValueError as exc:
        raise CorpusError(f"{where}: {exc}") from None
    if kind_set is not None and not kind_set:
        raise CorpusError(f"{where}: kinds, when given, must not be empty")
    for flag in ("accept_check", "accept_visible"):
        if not isinstance(raw.get(flag, True), bool):
            raise CorpusError(f"{where}: {flag} must be true or false")
    return Case(
        name=name,
        sql=raw["sql"],
        expect=expect,
        theme=theme,
        kinds=kind_set,
        rows=raw.get("rows"),
        error_contains=raw.get("error_contains"),
        accept_check=raw.get("accept_check", True),
        accept_visible=raw.get("accept_visible", True),
    )


def build_fixture(path: Path) -> Path:
    """Create the corpus database at `path` from fixture.sql."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(FIXTURE_SQL.read_text(encoding="utf-8"))
        connection.commit()
    finally:
        connection.close()
    return path


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def asked_kinds(question: ElicitRequestFormParams) -> frozenset[ChangeKind]:
    """The change kinds named on the question's `Change:` line, e.g. `data change (delete, insert)`."""
    line = next(line for line in question.message.splitlines() if line.startswith("Change: "))
    named = [kind.strip() for group in re.findall(r"\(([^)]*)\)", line) for kind in group.split(",")]
    return frozenset(ChangeKind(kind) for kind in named)


def same_statement(recorded: str, sql: str) -> bool:
    """Whether `recorded` (in the audit log) is `sql` as SafeDB runs it: empty statements after it (`;;`) are
    left out."""
    return recorded.rstrip(_SEPARATORS) == sql.rstrip(_SEPARATORS)


def last_decision(audit_path: Path) -> tuple[str, str] | None:
    """The newest (decision, sql) in the audit log a server process keeps."""
    audit = SqliteAuditStore.open(audit_path, readonly=True)
    try:
        decisions = audit_decisions(audit)
    finally:
        audit.close()
    return decisions[-1] if decisions else None


def check_declined_outcome(case: Case, result: CallToolResult, responder: Responder, audit_path: Path) -> None:
    """What a declining client must see for `case`: a read runs unasked, a change asks once and is
    declined (and the audit log says so), a refusal fails without asking."""
    text = text_of(result)
    structured = result.structured_content or {}
    if case.expect == "run":
        assert responder.asked == [], f"a read asked for approval: {text}"
        assert not result.is_error, f"a read failed: {text}"
        assert "columns" in structured, text
        if case.rows is not None:
            assert structured["rows"] == case.rows
    elif case.expect == "ask":
        assert len(responder.asked) == 1, f"a change ran without asking: {text}"
        question = responder.asked[0]
        assert isinstance(question, ElicitRequestFormParams)
        # Shown and recorded as it runs: empty statements after it (`;;`) are left out, and its later lines are
        # indented in the question.
        assert case.sql.strip().rstrip(_SEPARATORS).replace("\n", "\n    ") in question.message
        if case.kinds is not None:
            assert asked_kinds(question) == case.kinds, question.message
        assert structured.get("status") == "declined", text
        assert structured.get("executed") is False
        last = last_decision(audit_path)
        assert last is not None
        assert last[0] == "declined"
        assert same_statement(last[1], case.sql)
    else:
        assert responder.asked == [], f"a statement that must be refused asked instead: {text}"
        assert result.is_error, f"a statement that must be refused did not fail: {text}"
        assert structured.get("executed") is False, text
        assert text.strip()
        if case.error_contains is not None:
            assert case.error_contains.lower() in text.lower(), text
