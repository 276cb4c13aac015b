"""The approval page's routes, served on the same HTTP app as /mcp.

    GET  /approvals              the pending approvals (approvers only)
    GET  /approvals/{id}?t=...   one approval: statement, classification, impact, client, time
    POST /approvals/{id}         approve or reject it (approvers only, same origin, CSRF token, link token)

A link works once: after a decision, or once the approval expires, it is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from safedb.approval.board import ApprovalBoard, BoardVerdict, WebApproval
from safedb.approval.display import readable_length
from safedb.approval.verification import justification_room
from safedb.settings import Approver
from safedb.web import pages
from safedb.web.security import REALM, ApproverCheck, CsrfTokens, origin_of, same_origin, same_text

# Not "runs now": on 2026-07-28 the statement runs only when the client's call comes back for the decision.
_RUNS_WHEN_TAKEN_UP = (
    "The statement runs when the client's call takes up the decision (at once, if the call still waits); "
    "you may close this page."
)
_NO_STORE = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"}


def approval_routes(board: ApprovalBoard, approvers: Sequence[Approver], public_url: str | None = None) -> list[Route]:
    csrf = CsrfTokens()
    authenticated_approver = ApproverCheck(approvers)
    public_origin = origin_of(public_url) if public_url else None

    def respond(title: str, text: str, status: int) -> HTMLResponse:
        return HTMLResponse(pages.message_page(title, text), status_code=status, headers=_NO_STORE)

    def unauthorized() -> HTMLResponse:
        response = respond("Approver sign-in needed", "Only a configured approver may see or decide approvals.", 401)
        response.headers["WWW-Authenticate"] = REALM
        return response

    def find(request: Request, token: str | None) -> WebApproval | HTMLResponse:
        approval = board.get(request.path_params["approval_id"])
        if approval is None or token is None or not same_text(token, approval.link_token):
            return respond("Unknown approval", "This approval link is not valid.", 404)
        if approval.verdict is BoardVerdict.WITHDRAWN:
            return respond("Withdrawn", "Nothing waits for this approval any more (the call ended); nothing runs.", 410)
        if approval.verdict is not BoardVerdict.PENDING:
            return respond("Already decided", f"This approval was already {approval.verdict}; the link is used.", 410)
        if approval.expired:
            return respond("Expired", "This approval expired; nothing was run.", 410)
        return approval

    async def pending(request: Request) -> Response:
        if await authenticated_approver(request) is None:
            return unauthorized()
        # Pages are rendered in a worker thread: showing a long statement's hidden characters, and highlighting it,
        # look at each of its characters (a second for a million), which would hold up every call of the server.
        return HTMLResponse(await anyio.to_thread.run_sync(pages.pending_page, board.pending()), headers=_NO_STORE)

    async def show(request: Request) -> Response:
        approver = await authenticated_approver(request)
        if approver is None:
            return unauthorized()
        found = find(request, request.query_params.get("t"))
        if isinstance(found, Response):
            return found
        token, room = csrf.issue(found.id, approver), justification_room(approver)
        body = await anyio.to_thread.run_sync(pages.approval_page, found, token, found.min_justification, room)
        return HTMLResponse(body, headers=_NO_STORE)

    async def decide(request: Request) -> Response:
        if not same_origin(request, public_origin):
            return respond("Refused", "Approvals can only be decided from SafeDB's own page.", 403)
        approver = await authenticated_approver(request)
        if approver is None:
            return unauthorized()
        form = await request.form()
        found = find(request, _text(form.get("t")))
        if isinstance(found, Response):
            return found
        if not csrf.valid(_text(form.get("csrf")) or "", found.id, approver):
            return respond("Refused", "The form is not valid for this approval; reload the page.", 403)
        decision = _text(form.get("decision"))
        justification = (_text(form.get("justification")) or "").strip()
        if decision not in ("approve", "reject"):
            return respond("Refused", "Choose approve or reject.", 400)
        approve = decision == "approve"
        minimum = found.min_justification if found.environment == "production" else 1
        if approve and readable_length(justification) < minimum:
            return respond("Justification needed", f"Approving needs a justification of {minimum}+ characters.", 400)
        if len(justification) > (room := justification_room(approver)):
            return respond("Justification too long", f"Give a justification of at most {room:,} characters.", 400)
        if not board.decide(found, approve=approve, approver=approver, justification=justification):
            return respond("Already decided", "This approval was decided or expired in the meantime.", 410)
        if approve:
            return respond("Approved", f"Approved by {approver}. {_RUNS_WHEN_TAKEN_UP}", 200)
        return respond("Rejected", f"Rejected by {approver}. The statement will not run.", 200)

    return [
        Route("/approvals", pending, methods=["GET"]),
        Route("/approvals/{approval_id}", show, methods=["GET"]),
        Route("/approvals/{approval_id}", decide, methods=["POST"]),
    ]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
