"""Red team of the approval page: credentials and tokens a Basic-auth header or a form can carry, and decisions
made through the address approvers' browsers use (`public_url`, as behind a proxy). Real server processes."""

from __future__ import annotations

import base64
import html
import re
import secrets
import sqlite3
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult, ElicitRequestURLParams, ElicitResult, Implementation, InputRequiredResult

from safedb.approval.board import MAX_WAITING
from tests.helpers import rows, serving_process
from tests.web.test_approval_page import (
    PASSWORD,
    QUERY,
    UrlResponder,
    approve_by_post,
    audit_records,
    http_status,
    link_token,
    post,
    prod_config,
    serving_prod,
    waiting_call,
)

pytestmark = pytest.mark.anyio


def basic(name: str, password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


def status_of(url: str, authorization: str) -> int:
    return http_status(urllib.request.Request(url, headers={"Authorization": authorization}))


def csrf_of(link: str, authorization: str) -> str:
    with urllib.request.urlopen(
        urllib.request.Request(link, headers={"Authorization": authorization}), timeout=10
    ) as page:
        found = re.search(r'name=csrf value="([^"]+)"', page.read().decode())
    assert found is not None
    return html.unescape(found.group(1))


def read_then_reject(link: str) -> str:
    """The approval page at `link` as alice sees it; then she rejects it (so that the waiting call ends)."""
    with urllib.request.urlopen(
        urllib.request.Request(link, headers={"Authorization": basic("alice")}), timeout=10
    ) as response:
        page = response.read().decode()
    fields = {"t": link_token(link), "csrf": csrf_of(link, basic("alice")), "decision": "reject"}
    assert post(link, fields, {"Authorization": basic("alice")}) == 200
    return page


async def test_non_ascii_names_tokens_and_passwords_are_answered_not_crashed_on(tmp_path: Path) -> None:
    """`hmac.compare_digest` refuses str with non-ASCII characters (TypeError): an approver named `José` could not
    sign in, and while one was configured, every wrong password of an approver listed before was a 500; a non-ASCII
    user name, link token or CSRF token from anyone was a 500 with a traceback in the log."""
    with serving_prod(tmp_path, approvers=("alice", "José")) as (server, database, audit):
        base = server.url.removesuffix("/mcp")
        assert status_of(f"{base}/approvals", basic("alice")) == 200
        assert status_of(f"{base}/approvals", basic("José")) == 200
        assert status_of(f"{base}/approvals", basic("alice", "wrong")) == 401
        assert status_of(f"{base}/approvals", basic("Zoë", "wrong")) == 401
        async with waiting_call(server.url, "legacy") as (responder, results):
            link = responder.urls[0]
            path = urllib.parse.urlsplit(link).path
            assert status_of(f"{base}{path}?t=%C3%A9t%C3%A9", basic("José")) == 404
            fields = {"t": link_token(link), "decision": "approve", "justification": "Removing voided invoice OPS-42"}
            assert post(link, {**fields, "t": "été"}, {"Authorization": basic("José")}) == 404
            assert post(link, {**fields, "csrf": "été"}, {"Authorization": basic("José")}) == 403
            assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
            csrf = csrf_of(link, basic("José"))
            assert post(link, {**fields, "csrf": csrf}, {"Authorization": basic("José")}) == 200
        assert not any("Traceback" in line for line in server.log), "".join(server.log)
    (result,) = results
    assert result.structured_content is not None
    assert result.structured_content["status"] == "executed"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(0,)]
    assert audit_records(audit) == [
        ("requested", None),
        ("accepted", "José: Removing voided invoice OPS-42"),
        ("executed", None),
    ]


@pytest.mark.parametrize("public_url", ["https://approvals.example", "https://Approvals.example:443/safedb/"])
async def test_a_decision_from_the_public_address_is_same_origin(tmp_path: Path, public_url: str) -> None:
    """Behind a proxy (TLS at the proxy, the server on 127.0.0.1), approvers' browsers are on `public_url`: their
    POST says `Origin: https://approvals.example` while the server sees `http://127.0.0.1:PORT`. Every decision
    was refused as cross-site; the public address is SafeDB's own page, other sites still are not."""
    with serving_prod(tmp_path, server_extra=f'public_url = "{public_url}"') as (server, database, audit):
        async with waiting_call(server.url, "legacy") as (responder, results):
            link = responder.urls[0]
            assert link.startswith(public_url.rstrip("/") + "/approvals/")
            # What the proxy forwards: the same path and query, to the server's own address.
            parts = urllib.parse.urlsplit(link)
            forwarded = server.url.removesuffix("/mcp") + parts.path.removeprefix("/safedb") + "?" + parts.query
            csrf = csrf_of(forwarded, basic("alice"))
            fields = {
                "t": link_token(link), "csrf": csrf, "decision": "approve",
                "justification": "Removing voided invoice OPS-42",
            }  # fmt: skip
            headers = {"Authorization": basic("alice"), "Sec-Fetch-Site": "same-origin"}
            assert post(forwarded, fields, {**headers, "Origin": "https://approvals.example.evil"}) == 403
            assert post(forwarded, fields, {**headers, "Origin": "http://approvals.example"}) == 403
            assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
            assert post(forwarded, fields, {**headers, "Origin": "https://approvals.example"}) == 200
    (result,) = results
    assert result.structured_content is not None
    assert result.structured_content["status"] == "executed"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(0,)]
    assert [decision for decision, _ in audit_records(audit)] == ["requested", "accepted", "executed"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    ("reason", "recorded"), [("Not during the freeze", "alice: Not during the freeze"), ("", "alice")]
)
async def test_a_rejection_on_the_page_records_who_rejected_and_why(
    tmp_path: Path, mode: str, reason: str, recorded: str
) -> None:
    """An approval records `alice: <justification>`; a rejection recorded neither the approver nor the reason they
    typed, so the log could not say who stopped a change."""
    with serving_prod(tmp_path, approvers=("alice", "bob")) as (server, database, audit):
        async with waiting_call(server.url, mode) as (responder, results):
            link = responder.urls[0]
            fields = {
                "t": link_token(link), "csrf": csrf_of(link, basic("alice")), "decision": "reject",
                "justification": reason,
            }  # fmt: skip
            assert post(link, fields, {"Authorization": basic("alice")}) == 200
    (result,) = results
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
    assert audit_records(audit) == [("requested", None), ("declined", recorded)]


async def test_password_guesses_do_not_hold_up_the_mcp_server(tmp_path: Path) -> None:
    """Each Basic-auth check runs PBKDF2 (600,000 rounds by default: a tenth of a second or more). It ran on the
    event loop, so anyone who knew an approver's name could stall every MCP call of the server for as long as they
    kept sending wrong passwords: 24 guesses held reads up for seconds. Checks now run in worker threads."""
    with serving_prod(tmp_path, iterations=600_000) as (server, _, _):
        guesses = urllib.request.Request(
            server.url.removesuffix("/mcp") + "/approvals", headers={"Authorization": basic("alice", "guess")}
        )

        def guess() -> int:
            return http_status(guesses, timeout=60)

        async with Client(server.url, mode="legacy") as client:
            slowest = 0.0
            finished: list[int] = []

            async def guessing() -> None:
                for _ in range(3):
                    finished.append(await anyio.to_thread.run_sync(guess))

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(guessing)
                while len(finished) < 24:
                    began = time.perf_counter()
                    with anyio.fail_after(60):
                        read = await client.call_tool("execute_query", {"query": "SELECT 1"})
                    slowest = max(slowest, time.perf_counter() - began)
                    assert not read.is_error
            attack = time.perf_counter() - started
    assert finished == [401] * 24
    assert slowest < 0.5, f"a read waited {slowest:.2f} s while 24 guesses took {attack:.2f} s"


async def test_password_guesses_do_not_hold_up_a_signed_in_approver(tmp_path: Path) -> None:
    """Every page and decision checks the approver's credentials again, and those checks queued behind anyone's
    guesses: with 60 guessers each of an approver's requests took 6 s. Credentials that passed are remembered."""
    with serving_prod(tmp_path, iterations=600_000) as (server, _, _):
        pending = server.url.removesuffix("/mcp") + "/approvals"
        guesses = urllib.request.Request(pending, headers={"Authorization": basic("alice", "guess")})
        approver = urllib.request.Request(pending, headers={"Authorization": basic("alice")})
        assert http_status(approver, timeout=60) == 200  # signs in
        finished: list[int] = []

        async def guessing() -> None:
            for _ in range(3):
                finished.append(await anyio.to_thread.run_sync(http_status, guesses, 60))

        async with anyio.create_task_group() as group:
            started = time.perf_counter()
            for _ in range(8):
                group.start_soon(guessing)
            await anyio.sleep(0.2)  # the guesses are queued
            began = time.perf_counter()
            status = await anyio.to_thread.run_sync(http_status, approver, 60)
            waited = time.perf_counter() - began
        attack = time.perf_counter() - started
    assert status == 200
    assert finished == [401] * 24
    assert waited < attack / 4, f"the signed-in approver waited {waited:.2f} s while 24 guesses took {attack:.2f} s"


async def test_a_name_that_is_no_approvers_takes_a_password_check_too(tmp_path: Path) -> None:
    """A wrong password for an approver's name took a PBKDF2 check (0.18 s), one for any other name none (0.001 s):
    the time of the answer told which names are approvers'."""
    with serving_prod(tmp_path, iterations=600_000) as (server, _, _):
        pending = server.url.removesuffix("/mcp") + "/approvals"

        def answer_time(name: str) -> float:
            request = urllib.request.Request(pending, headers={"Authorization": basic(name, "guess")})
            began = time.perf_counter()
            assert http_status(request, timeout=60) == 401
            return time.perf_counter() - began

        approvers = sorted(answer_time("alice") for _ in range(3))
        others = sorted(answer_time("mallory") for _ in range(3))
    assert others[1] > approvers[1] / 3, f"an approver's name: {approvers[1]:.3f} s, another: {others[1]:.3f} s"


async def test_the_client_name_on_the_page_hides_and_reorders_nothing(tmp_path: Path) -> None:
    """The client names itself (clientInfo). With a right-to-left override in its name, the page's "Requested by"
    (and the pending list) showed the rest of the line reversed, its session id included; a run of line breaks or
    blanks pushed the session id out of sight. The name is shown as the statement is: `⟨U+202E⟩`."""
    name = Implementation(name="ops-console\u202e" + "\n" * 40 + "x", version="1.0")
    with serving_prod(tmp_path) as (server, database, _):
        async with waiting_call(server.url, "legacy", client_info=name) as (responder, _results):
            link = responder.urls[0]
            request = urllib.request.Request(link, headers={"Authorization": basic("alice")})
            with urllib.request.urlopen(request, timeout=10) as response:
                page = response.read().decode()
            listing = urllib.request.Request(
                server.url.removesuffix("/mcp") + "/approvals", headers={"Authorization": basic("alice")}
            )
            with urllib.request.urlopen(listing, timeout=10) as response:
                pending = response.read().decode()
            fields = {"t": link_token(link), "csrf": csrf_of(link, basic("alice")), "decision": "reject"}
            assert post(link, fields, {"Authorization": basic("alice")}) == 200
    caller = re.search(r"<dd id=caller>(.*?)</dd>", page, re.S)
    assert caller is not None
    assert caller.group(1).startswith("ops-console⟨U+202E⟩\n⟨40 line breaks⟩\nx 1.0 (session ")
    assert "\u202e" not in page
    assert "\u202e" not in pending
    assert "ops-console⟨U+202E⟩" in pending
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]


async def test_the_pending_list_links_through_the_public_address(tmp_path: Path) -> None:
    """With `public_url` under a path (a proxy serving SafeDB at /safedb/), the pending list's review links were
    absolute paths (`/approvals/...`), which leave the prefix out: the browser went to the proxy's own
    /approvals. They now resolve, from the list, to the same link the client was given."""
    public = "https://approvals.example/safedb"
    with serving_prod(tmp_path, server_extra=f'public_url = "{public}/"') as (server, _, _):
        async with waiting_call(server.url, "legacy") as (responder, _results):
            link = responder.urls[0]
            listing = urllib.request.Request(
                server.url.removesuffix("/mcp") + "/approvals", headers={"Authorization": basic("alice")}
            )
            with urllib.request.urlopen(listing, timeout=10) as response:
                pending = response.read().decode()
            direct = link.replace(public, server.url.removesuffix("/mcp"))  # as the proxy forwards it
            fields = {"t": link_token(link), "csrf": csrf_of(direct, basic("alice")), "decision": "reject"}
            assert post(direct, fields, {"Authorization": basic("alice")}) == 200
    review = re.search(r"<a href='([^']+)'>review</a>", pending)
    assert review is not None
    assert link.startswith(f"{public}/approvals/")
    assert urllib.parse.urljoin(f"{public}/approvals", html.unescape(review.group(1))) == link


async def test_an_approval_that_expires_past_the_calendar_still_shows(tmp_path: Path) -> None:
    """`approval_timeout = 1e300` (never, in effect) is a valid setting; the page printed the expiry with
    `time.gmtime`, which raised OverflowError: every approval page was a 500."""
    with serving_prod(tmp_path, approval_timeout="1e300") as (server, database, _):
        async with waiting_call(server.url, "legacy") as (responder, _results):
            page = read_then_reject(responder.urls[0])
        assert not any("Traceback" in line for line in server.log), "".join(server.log)
    assert "(expires never)" in page
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]


async def test_the_page_holds_a_bounded_number_of_waiting_approvals(tmp_path: Path) -> None:
    """2026-07-28: a client that never comes back with its answers left each question's approval on the page
    until it expired, statement and preview included: any number of them. Past `MAX_WAITING` a call is now
    refused, and the refusal recorded."""
    call = {"query": QUERY, "target": "prod"}
    with serving_prod(tmp_path) as (server, database, audit):
        async with Client(server.url, mode="auto", elicitation_callback=UrlResponder()) as client:
            for _ in range(MAX_WAITING):
                asked = await client.session.call_tool("execute_query", call, allow_input_required=True)
                assert isinstance(asked, InputRequiredResult)
            refused = await client.session.call_tool("execute_query", call, allow_input_required=True)
    assert isinstance(refused, CallToolResult)
    assert refused.is_error
    assert refused.structured_content is not None
    assert refused.structured_content["status"] == "refused"
    assert f"already holds {MAX_WAITING:,} approvals waiting" in refused.structured_content["message"]
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
    decisions = [decision for decision, _ in audit_records(audit)]
    assert decisions == ["requested"] * MAX_WAITING + ["refused"]


async def test_an_approval_whose_question_could_not_be_recorded_leaves_the_page(tmp_path: Path) -> None:
    """2026-07-28: the approval went on the page before its `requested` record was written; when that write
    failed, the call failed (nothing asked, nothing run) but the approval stayed listed until it expired."""
    with serving_prod(tmp_path) as (server, database, audit):
        with closing(sqlite3.connect(audit)) as log, log:  # the audit log refuses the question's record
            log.execute(
                "CREATE TRIGGER no_questions BEFORE INSERT ON audit_log WHEN NEW.decision = 'requested' "
                "BEGIN SELECT RAISE(ABORT, 'no questions today'); END"
            )
        async with Client(server.url, mode="auto", elicitation_callback=UrlResponder()) as client:
            failed = await client.session.call_tool(
                "execute_query", {"query": QUERY, "target": "prod"}, allow_input_required=True
            )
        listing = server.url.removesuffix("/mcp") + "/approvals"
        request = urllib.request.Request(listing, headers={"Authorization": basic("alice")})
        with urllib.request.urlopen(request, timeout=10) as response:
            pending = response.read().decode()
    assert isinstance(failed, CallToolResult)
    assert failed.is_error
    assert "no questions today" in str(failed.structured_content)
    assert "DELETE FROM invoices" not in pending
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]


async def test_the_page_names_the_code_the_approval_covers(tmp_path: Path) -> None:
    """The form's question names the triggers and views a statement runs (other code stops the approved run); the
    page did not."""
    with serving_prod(tmp_path) as (server, database, _):
        with closing(sqlite3.connect(database)) as connection, connection:
            connection.execute("CREATE TRIGGER invoices_note AFTER DELETE ON invoices BEGIN SELECT 1; END")
        async with waiting_call(server.url, "legacy") as (responder, _results):
            shown = read_then_reject(responder.urls[0])
    assert "<dt>Runs the code of</dt><dd id=runs>invoices_note (triggers, views)</dd>" in shown


async def test_a_retry_on_a_process_that_did_not_ask_leaves_the_approval_to_the_one_that_did(tmp_path: Path) -> None:
    """Processes sharing the request-state keys and the audit log finish each other's 2026-07-28 rounds, but an
    approval page's decisions stay in the process that asked. A retry reaching another one was recorded as the
    client's `cancelled`, the approver's decision lost, and the retry on the right process then refused as "already
    used" although nothing had run. Now the other process refuses it, and the approval stays as it was."""
    config, database, audit = prod_config(tmp_path)
    command = [sys.executable, "-m", "safedb", "serve", "--config", str(config), "--port", "0"]
    command += ["--request-state-key", secrets.token_urlsafe(48)]
    env = {"SAFEDB_DATA_DIR": str(tmp_path / "data")}
    with serving_process(command, env=env) as asking, serving_process(command, env=env) as other:
        call = {"query": QUERY, "target": "prod"}
        async with Client(asking.url, mode="auto", elicitation_callback=UrlResponder()) as client:
            asked = await client.session.call_tool("execute_query", call, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        assert asked.input_requests is not None
        ((key, request),) = asked.input_requests.items()
        assert isinstance(request.params, ElicitRequestURLParams)
        assert await anyio.to_thread.run_sync(approve_by_post, request.params.url, "Removing voided invoice") == 200
        retry = {"input_responses": {key: ElicitResult(action="accept")}, "request_state": asked.request_state}
        results = []
        for server in (other, asking):
            async with Client(server.url, mode="auto", elicitation_callback=UrlResponder()) as client:
                results.append(await client.session.call_tool("execute_query", call, **retry))
    elsewhere, taken_up = (result.structured_content or {} for result in results)
    assert elsewhere["status"] == "refused"
    assert "another process asked it" in elsewhere["message"]
    assert taken_up["status"] == "executed"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(0,)]
    assert [d for d, _ in audit_records(audit)] == ["requested", "refused", "accepted", "executed"]
