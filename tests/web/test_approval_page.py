"""The approval page in a real headless Chromium: a tool call waits in URL mode, an approver decides.

Screenshots of the page are saved under test-artifacts/ for review.
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import sqlite3
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult, ElicitRequestURLParams, ElicitResult, Implementation, InputRequiredResult
from playwright.async_api import async_playwright

from safedb.audit import AuditQuery, SqliteAuditStore
from safedb.db.demo import ensure_demo_database
from safedb.web.passwords import hash_password
from tests.helpers import ServerProcess, rows, serving_process

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("SAFEDB_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery staple"
QUERY = "DELETE FROM invoices WHERE status = 'void'"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip


def require_chromium() -> None:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        if os.environ.get("SAFEDB_REQUIRE_ALL") == "1":
            pytest.fail(f"Chromium is required (SAFEDB_REQUIRE_ALL=1) but {CHROMIUM} is missing")
        pytest.skip(f"Chromium not installed at {CHROMIUM}")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path, Path]]:
    with serving_prod(tmp_path) as server:
        yield server


def prod_config(
    tmp_path: Path,
    approval_timeout: float | str = 60,
    approvers: tuple[str, ...] = ("alice",),
    server_extra: str = "",
    iterations: int = 1000,
) -> tuple[Path, Path, Path]:
    """A configuration file with one production target approved on the web page by `approvers` (all with
    PASSWORD), in `tmp_path`: the file, the target's database and the audit log."""
    database = ensure_demo_database(tmp_path / "prod")
    audit = tmp_path / "audit.db"
    config = tmp_path / "safedb.toml"
    hashed = hash_password(PASSWORD, iterations=iterations)
    listed = ", ".join(f'{{ name = "{name}", password_hash = "{hashed}" }}' for name in approvers)
    config.write_text(
        f"""
[server]
audit_db = "{audit.name}"
approvers = [{listed}]
{server_extra}

[targets.prod]
database = "prod/demo.db"
environment = "production"

[targets.prod.policy]
channel = "web"
approval_timeout = {approval_timeout}
""",
        encoding="utf-8",
    )
    return config, database, audit


@contextmanager
def serving_prod(
    tmp_path: Path,
    approval_timeout: float | str = 60,
    approvers: tuple[str, ...] = ("alice",),
    server_extra: str = "",
    iterations: int = 1000,
) -> Iterator[tuple[ServerProcess, Path, Path]]:
    """SafeDB serving `prod_config` over HTTP."""
    config, database, audit = prod_config(tmp_path, approval_timeout, approvers, server_extra, iterations)
    command = [sys.executable, "-m", "safedb", "serve", "--config", str(config), "--port", "0"]
    with serving_process(command, env={"SAFEDB_DATA_DIR": str(tmp_path / "data")}) as server:
        yield server, database, audit


class UrlResponder:
    """Consents to open every URL-mode question and hands the URL to the test (as a person's client would)."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.seen = anyio.Event()

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        self.urls.append(params.url)
        self.seen.set()
        return ElicitResult(action="accept")


@asynccontextmanager
async def waiting_call(
    url: str, mode: str, client_info: Implementation | None = None
) -> AsyncIterator[tuple[UrlResponder, list[CallToolResult]]]:
    """Start execute_query in the background; yield once the approval link has arrived."""
    responder = UrlResponder()
    results: list[CallToolResult] = []
    client = Client(url, mode=mode, elicitation_callback=responder, client_info=client_info)
    async with client, anyio.create_task_group() as group:

        async def call() -> None:
            results.append(await client.call_tool("execute_query", {"query": QUERY, "target": "prod"}))

        group.start_soon(call)
        with anyio.fail_after(30):
            await responder.seen.wait()
        yield responder, results
        with anyio.fail_after(60):
            while not results:
                await anyio.sleep(0.05)


async def decide_in_browser(link: str, button: str, justification: str, shot: str) -> str:
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(http_credentials={"username": "alice", "password": PASSWORD})
            page = await context.new_page()
            await page.goto(link)
            assert QUERY in (await page.inner_text("#statement")).replace("\n", " ")
            assert "data change (delete)" in await page.inner_text("#classification")
            impact = await page.inner_text("#impact")
            assert "1 row would be affected" in impact
            assert "An approval holds for exactly 1 row" in impact
            assert "mcp" in await page.inner_text("#caller")
            await page.fill("#justification", justification)
            await page.screenshot(path=str(ARTIFACTS / f"{shot}-before.png"), full_page=True)
            await page.click(f"button.{button}")
            await page.wait_for_selector("#message")
            await page.screenshot(path=str(ARTIFACTS / f"{shot}-after.png"), full_page=True)
            return await page.inner_text("#message")
        finally:
            await browser.close()


def audit_records(path: Path) -> list[tuple[str, str | None]]:
    with SqliteAuditStore.open(path, readonly=True) as store:
        return [(str(r.decision), r.justification) for r in store.records(AuditQuery())]


def post(url: str, fields: dict[str, str], headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), headers=headers, method="POST")
    return http_status(request)


def http_status(request: urllib.request.Request, timeout: float = 10) -> int:
    """The status the server answers `request` with, error statuses included."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return error.code


def link_token(link: str) -> str:
    """The approval link's own token (its `t` parameter), which a decision must carry."""
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["t"][0]


BASIC = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approve_on_the_page_runs_the_statement(served: tuple[ServerProcess, Path, Path], mode: str) -> None:
    require_chromium()
    server, database, audit = served
    async with waiting_call(server.url, mode) as (responder, results):
        message = await decide_in_browser(
            responder.urls[0], "approve", "Removing voided invoice per OPS-42", f"approve-{mode}"
        )
    assert "Approved by alice" in message
    (result,) = results
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["status"] == "executed"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(0,)]
    decisions = audit_records(audit)
    assert [d for d, _ in decisions] == ["requested", "accepted", "executed"]
    assert decisions[1][1] == "alice: Removing voided invoice per OPS-42"
    # The link is used: neither the page nor a decision is accepted again.
    used = urllib.request.Request(responder.urls[0], headers={"Authorization": BASIC})
    with pytest.raises(urllib.error.HTTPError) as gone:
        urllib.request.urlopen(used, timeout=10)
    gone.value.close()
    assert gone.value.code == 410


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_approval_on_the_page_holds_only_for_the_rows_shown(
    served: tuple[ServerProcess, Path, Path], mode: str
) -> None:
    """The page showed 1 row; a second void invoice arrived before the approver decided: nothing is deleted."""
    require_chromium()
    server, database, audit = served
    async with waiting_call(server.url, mode) as (responder, results):
        connection = sqlite3.connect(database)
        with connection:
            connection.execute("INSERT INTO invoices VALUES (9, 2, 100, 'void', '2026-11-01')")
        connection.close()
        message = await decide_in_browser(
            responder.urls[0], "approve", "Removing voided invoice per OPS-42", f"approve-stale-{mode}"
        )
    assert "Approved by alice" in message
    (result,) = results
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["status"] == "failed"
    assert "affected 2 rows, but was approved for the 1 row" in result.structured_content["message"]
    assert rows(database, "SELECT id FROM invoices WHERE status = 'void' ORDER BY id") == [(7,), (9,)]
    assert [d for d, _ in audit_records(audit)] == ["requested", "accepted", "failed"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_reject_on_the_page_changes_nothing(served: tuple[ServerProcess, Path, Path], mode: str) -> None:
    require_chromium()
    server, database, audit = served
    async with waiting_call(server.url, mode) as (responder, results):
        message = await decide_in_browser(responder.urls[0], "reject", "", f"reject-{mode}")
    assert "Rejected by alice" in message
    (result,) = results
    assert result.structured_content is not None
    assert result.structured_content["status"] == "declined"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
    assert [d for d, _ in audit_records(audit)] == ["requested", "declined"]


async def test_a_cancelled_call_withdraws_its_approval(served: tuple[ServerProcess, Path, Path]) -> None:
    """The client gives up on the call while the approval waits: the page no longer offers it for a decision."""
    server, database, audit = served
    responder = UrlResponder()
    async with (
        Client(server.url, mode="legacy", elicitation_callback=responder) as client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(client.call_tool, "execute_query", {"query": QUERY, "target": "prod"})
        with anyio.fail_after(30):
            await responder.seen.wait()
        group.cancel_scope.cancel()
    link = responder.urls[0]
    token = link_token(link)
    fields = {"t": token, "csrf": "x", "decision": "approve", "justification": "a justification long enough"}
    with anyio.fail_after(10):
        while [d for d, _ in audit_records(audit)] != ["requested", "cancelled"]:
            await anyio.sleep(0.05)
    with pytest.raises(urllib.error.HTTPError) as shown:
        urllib.request.urlopen(urllib.request.Request(link, headers={"Authorization": BASIC}), timeout=10)
    page = shown.value.read().decode()
    shown.value.close()
    assert shown.value.code == 410
    assert "Nothing waits for this approval" in page
    assert post(link, fields, {"Authorization": BASIC}) == 410
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]


async def test_cross_site_and_unauthenticated_posts_are_refused(served: tuple[ServerProcess, Path, Path]) -> None:
    server, database, _ = served
    async with waiting_call(server.url, "legacy") as (responder, results):
        link = responder.urls[0]
        token = link_token(link)
        fields = {"t": token, "csrf": "x", "decision": "approve", "justification": "a justification long enough"}
        cross_site = post(link, fields, {"Authorization": BASIC, "Origin": "http://evil.example"})
        fetch_site = post(link, fields, {"Authorization": BASIC, "Sec-Fetch-Site": "cross-site"})
        no_credentials = post(link, fields, {})
        wrong_token = post(link, fields, {"Authorization": BASIC})
        assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
        message = await decide_in_browser(link, "reject", "", "refused-then-rejected")
    assert (cross_site, fetch_site, no_credentials, wrong_token) == (403, 403, 401, 403)
    assert "Rejected" in message
    assert results[0].structured_content is not None
    assert results[0].structured_content["status"] == "declined"


async def test_an_invisible_justification_does_not_approve(served: tuple[ServerProcess, Path, Path]) -> None:
    server, database, _ = served
    async with waiting_call(server.url, "legacy") as (responder, results):
        link = responder.urls[0]
        refused = await decide_in_browser(link, "approve", "\u200b" * 30, "invisible-justification")
        assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
        await decide_in_browser(link, "reject", "", "rejected-after-invisible-justification")
    assert "needs a justification" in refused
    assert results[0].structured_content is not None
    assert results[0].structured_content["status"] == "declined"


async def test_a_justification_fills_the_answer_with_the_approvers_name(
    served: tuple[ServerProcess, Path, Path],
) -> None:
    """Red team: the answer records `alice: <justification>`, within the form's 2,000 characters: a justification the
    page took up to 2,000 made the call fail ("Error executing tool") and left the audit log without an answer."""
    require_chromium()
    server, database, audit = served
    room = 2000 - len("alice: ")
    async with waiting_call(server.url, "legacy") as (responder, results):
        link = responder.urls[0]
        with urllib.request.urlopen(urllib.request.Request(link, headers={"Authorization": BASIC}), timeout=10) as page:
            html_page = page.read().decode()
        csrf = re.search(r'name=csrf value="([^"]+)"', html_page)
        assert csrf is not None
        assert f'maxlength="{room}"' in html_page
        fields = {"t": link_token(link), "csrf": html.unescape(csrf[1]), "decision": "approve"}
        too_long = post(link, {**fields, "justification": "x" * (room + 1)}, {"Authorization": BASIC})
        # The browser keeps to the page's limit: the rest of what is typed is left out.
        approved = await decide_in_browser(link, "approve", "x" * (room + 50), "justification-at-its-limit")
    assert too_long == 400
    assert "Approved by alice" in approved
    assert results[0].structured_content is not None
    assert results[0].structured_content["status"] == "executed"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(0,)]
    decisions = audit_records(audit)
    assert [d for d, _ in decisions] == ["requested", "accepted", "executed"]
    assert decisions[1][1] == "alice: " + "x" * room


async def test_pending_list_needs_an_approver(served: tuple[ServerProcess, Path, Path]) -> None:
    server, _, _ = served
    base = server.url.removesuffix("/mcp")
    async with waiting_call(server.url, "legacy") as (responder, _results):
        with pytest.raises(urllib.error.HTTPError) as anonymous:
            urllib.request.urlopen(f"{base}/approvals", timeout=10)
        listed = (
            urllib.request.urlopen(
                urllib.request.Request(f"{base}/approvals", headers={"Authorization": BASIC}), timeout=10
            )
            .read()
            .decode()
        )
        assert "review" in listed
        assert "DELETE FROM invoices" in listed
        await decide_in_browser(responder.urls[0], "reject", "", "list-then-rejected")
    anonymous.value.close()
    assert anonymous.value.code == 401


def approve_by_post(link: str, justification: str) -> int:
    """Approve as the page's form would: read the form's CSRF token from the page, then post the decision."""
    page = urllib.request.urlopen(urllib.request.Request(link, headers={"Authorization": BASIC}), timeout=10)
    csrf = re.search(r'name=csrf value="([^"]+)"', page.read().decode())
    page.close()
    assert csrf is not None
    token = link_token(link)
    fields = {"t": token, "csrf": html.unescape(csrf.group(1)), "decision": "approve", "justification": justification}
    return post(link, fields, {"Authorization": BASIC})


async def test_an_approval_expires_with_its_question_on_a_late_retry(tmp_path: Path) -> None:
    """2026-07-28: the approver approves in time, but the client comes back with it only after the question
    expired: the approval no longer counts, and nothing runs."""
    with serving_prod(tmp_path, approval_timeout=5) as (server, database, audit):
        async with Client(server.url, mode="auto", elicitation_callback=UrlResponder()) as client:
            call = {"query": QUERY, "target": "prod"}
            asked = await client.session.call_tool("execute_query", call, allow_input_required=True)
            assert isinstance(asked, InputRequiredResult)
            assert asked.input_requests is not None
            ((key, request),) = asked.input_requests.items()
            assert isinstance(request.params, ElicitRequestURLParams)
            assert approve_by_post(request.params.url, "Removing voided invoice per OPS-42") == 200
            await anyio.sleep(5.2)
            late = await client.session.call_tool(
                "execute_query", call, input_responses={key: ElicitResult(action="accept")},
                request_state=asked.request_state,
            )  # fmt: skip
    assert late.structured_content is not None
    assert late.structured_content["status"] == "timed_out"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
    assert [d for d, _ in audit_records(audit)] == ["requested", "timed_out"]


class LateConsent:
    """Handshake era: a client that consents to open the link only `after` seconds later (never, for None), while the
    approver approves at once (`approve`)."""

    def __init__(self, after: float | None, approve: bool) -> None:
        self.after = after
        self.approve = approve

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        if self.approve:
            assert (
                await anyio.to_thread.run_sync(approve_by_post, params.url, "Removing voided invoice per OPS-42") == 200
            )
        await (anyio.sleep_forever() if self.after is None else anyio.sleep(self.after))
        return ElicitResult(action="accept")


@pytest.mark.parametrize(
    "client", [LateConsent(after=None, approve=False), LateConsent(after=4, approve=True)], ids=["never", "late"]
)
async def test_a_link_consented_to_late_or_never_times_out(tmp_path: Path, client: LateConsent) -> None:
    """Handshake era: the client's consent to open the link must come while the approval holds. Unanswered, the call
    waited for good with only `requested` in the log; answered late, an approval given in time ran all the same."""
    with serving_prod(tmp_path, approval_timeout=3) as (server, database, audit):
        with anyio.fail_after(30):
            async with Client(server.url, mode="legacy", elicitation_callback=client) as session:
                result = await session.call_tool("execute_query", {"query": QUERY, "target": "prod"})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert rows(database, "SELECT count(*) FROM invoices WHERE status = 'void'") == [(1,)]
    assert [d for d, _ in audit_records(audit)] == ["requested", "timed_out"]
