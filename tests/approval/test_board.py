"""The approval page's board keeps what it holds bounded, whatever clients do."""

from __future__ import annotations

import pytest

from safedb.approval import board as board_module
from safedb.approval.board import MAX_SETTLED, MAX_WAITING, ApprovalBoard, BoardVerdict, WebApproval
from safedb.db.backend import Impact
from safedb.errors import TooManyWaiting
from safedb.sql.classification import Change, ChangeKind, Classification, DatabaseObject, ObjectType

_DELETE = Classification(
    "DELETE FROM invoices WHERE id = 4", (Change(ChangeKind.DELETE, DatabaseObject(ObjectType.TABLE, "invoices")),)
)


def _open(board: ApprovalBoard, number: int, classification: Classification = _DELETE) -> WebApproval:
    return board.open(
        f"approval-{number}",
        target="main",
        environment="production",
        classification=classification,
        impact=Impact(lines=("1 row would be affected.",), rows_affected=1),
        caller="agent",
        timeout=600,
        min_justification=0,
    )


def test_undecided_approvals_are_refused_past_the_limit() -> None:
    board = ApprovalBoard()
    approvals = [_open(board, number) for number in range(MAX_WAITING)]
    with pytest.raises(TooManyWaiting, match=f"already holds {MAX_WAITING:,} approvals waiting"):
        _open(board, MAX_WAITING)
    assert board.get(f"approval-{MAX_WAITING}") is None
    # A decided one no longer waits: there is room for one more.
    assert board.decide(approvals[0], approve=False, approver="alice", justification="no")
    assert _open(board, MAX_WAITING).verdict is BoardVerdict.PENDING


def test_undecided_statements_are_refused_past_their_characters_in_all() -> None:
    board = ApprovalBoard()
    large = Classification("DELETE FROM invoices WHERE note = '" + "x" * 999_950 + "'", _DELETE.changes)
    per_statement = len(large.statement)
    fitting = board_module.MAX_WAITING_CHARACTERS // per_statement
    for number in range(fitting):
        _open(board, number, large)
    with pytest.raises(TooManyWaiting, match=r"as many waiting statements as it takes \(50,000,000 characters\)"):
        _open(board, fitting, large)
    assert _open(board, fitting, _DELETE).verdict is BoardVerdict.PENDING  # a short one still fits


def test_settled_approvals_are_forgotten_oldest_first_and_decided_ones_kept() -> None:
    board = ApprovalBoard()
    approved = _open(board, 0)
    assert board.decide(approved, approve=True, approver="alice", justification="month-end fix")
    rejected = _open(board, 1)
    assert board.decide(rejected, approve=False, approver="bob", justification="wrong month")
    for number in range(2, MAX_SETTLED + 12):
        board.withdraw(_open(board, number))  # a client that declined to open the page
    _open(board, MAX_SETTLED + 12)
    kept = [number for number in range(MAX_SETTLED + 13) if board.get(f"approval-{number}") is not None]
    # The decisions wait for their clients; of the withdrawn ones, the newest MAX_SETTLED stay for the page.
    assert kept[:2] == [0, 1]
    assert kept[2:] == list(range(12, MAX_SETTLED + 13))
