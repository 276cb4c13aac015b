"""Approval tickets: what they bind, and what their encoded form accepts back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from safedb.approval.binding import ApprovalTicket
from safedb.db.backend import UNBOUND, Bounds
from safedb.sql.classification import Classification


def classification(statement: str) -> Classification:
    return Classification(statement=statement, changes=())


@pytest.mark.parametrize(
    "bounds",
    [
        UNBOUND,
        Bounds(rows=0),
        Bounds(rows=3, row_changes=("public.t: 3 rows deleted",)),
        Bounds(drops=()),
        Bounds(drops=("view public.v", 'table "odd ""name"""')),
    ],
)
def test_a_ticket_comes_back_as_it_was_issued(bounds: Bounds) -> None:
    ticket = ApprovalTicket.issue(classification("DELETE FROM t"), 60, "client", bounds)
    assert ApprovalTicket.decode(ticket.encode()) == ticket
    fields = {field.name for field in dataclasses.fields(ticket)} - {"bounds"}
    assert json.loads(ticket.encode()).keys() == {"v", "rows_shown", "drops_shown", "row_changes_shown"} | fields


def test_a_ticket_covers_its_own_statement_and_client_only() -> None:
    ticket = ApprovalTicket.issue(classification("DELETE FROM t WHERE id = 1"), 60, "client", Bounds(rows=1))
    assert ticket.covers(classification("DELETE FROM t WHERE id = 1"), "client")
    assert not ticket.covers(classification("DELETE FROM t"), "client")
    assert not ticket.covers(classification("DELETE FROM t WHERE id = 1"), "another client")


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[]",
        # A ticket of version 1 bound no row count: its question is asked again.
        json.dumps({"v": 1, "id": "a", "statement": "b", "changes": "c", "caller": "d", "expires": 9e9}),
        json.dumps({"v": 2, "id": "a", "statement": "b", "changes": "c", "caller": "d", "expires": 9e9}),
        json.dumps(
            {"v": 2, "id": "a", "statement": "b", "changes": "c", "caller": "d", "expires": 9e9, "rows_shown": "x"}
        ),
    ],
)
def test_anything_but_a_current_ticket_decodes_to_none(text: str | None) -> None:
    assert ApprovalTicket.decode(text) is None
