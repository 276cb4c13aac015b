"""Who may decide, and that a decision comes from SafeDB's own page: Basic auth against the configured
approvers, a same-origin check, and a CSRF token bound to the approval and the approver."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from starlette.requests import Request

from safedb.settings import Approver
from safedb.web.passwords import verify_password

REALM = 'Basic realm="SafeDB approvals", charset="UTF-8"'


class ApproverCheck:
    """Who the request's Basic credentials name, when the password is right.

    A password check is PBKDF2 (600,000 rounds by default: a tenth of a second or more of CPU). It runs in a
    worker thread, never on the event loop that serves every MCP call, and at most `_CHECKS_AT_ONCE` run at
    once, so a flood of guesses queues here. An approver's browser sends the credentials again with every page
    and decision: once they passed, they are remembered for `_REMEMBERED_FOR` seconds (as a keyed digest), so a
    signed-in approver does not queue behind the guesses. A name that is no approver's costs a check too, so
    that the time of an answer does not tell which names are approvers'.
    """

    _CHECKS_AT_ONCE = 2
    _REMEMBERED_FOR = 600.0

    def __init__(self, approvers: Sequence[Approver]) -> None:
        self._approvers = tuple(approvers)
        self._limiter = anyio.CapacityLimiter(self._CHECKS_AT_ONCE)
        self._key = secrets.token_bytes(32)
        self._remembered: dict[bytes, tuple[str, float]] = {}

    async def __call__(self, request: Request) -> str | None:
        credentials = _basic_credentials(request)
        if credentials is None or not self._approvers:
            return None
        name, password = credentials
        digest = hmac.new(self._key, f"{name}\0{password}".encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
        remembered = self._remembered.get(digest)
        if remembered is not None and remembered[1] > time.monotonic():
            return remembered[0]
        approver = next((approver for approver in self._approvers if same_text(approver.name, name)), None)
        stored = (approver or self._approvers[0]).password_hash
        valid = await anyio.to_thread.run_sync(verify_password, stored, password, limiter=self._limiter)
        if approver is None or not valid:
            return None
        now = time.monotonic()
        self._remembered = {key: value for key, value in self._remembered.items() if value[1] > now}
        self._remembered[digest] = (approver.name, now + self._REMEMBERED_FOR)
        return approver.name


def _basic_credentials(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        name, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return name, password


def same_text(a: str, b: str) -> bool:
    """`a == b` in constant time, for any text: `hmac.compare_digest` refuses str with non-ASCII characters
    (TypeError), so a name like `José`, or a token someone typed, would otherwise fail the request."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def same_origin(request: Request, public_origin: str | None = None) -> bool:
    """False for a request a browser marks as coming from another site.

    Browsers send `Origin` on every POST and `Sec-Fetch-Site` on every request; either one that names
    another origin refuses the request. Clients that send neither are not browsers, so no other site
    can make them send an approver's credentials. SafeDB's own origin is the one the request reached,
    or `public_origin` (that of `public_url`, where approvers' browsers reach it through a proxy).
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin in (f"{request.url.scheme}://{request.url.netloc}", public_origin)


def origin_of(url: str) -> str | None:
    """The origin a browser names (`Origin` header) for pages under `url`: scheme and host in lower case, the
    port only when it is not the scheme's default. None when `url` cannot be split (`Invalid IPv6 URL`): no
    browser's page is there (loading the configuration refuses such a `server.public_url`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a port number: the links name no port either
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" if port is None or port == default else f"{scheme}://{host}:{port}"


class CsrfTokens:
    """Tokens a form carries: an HMAC of the approval id and the approver under a key of this process."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def issue(self, approval_id: str, approver: str) -> str:
        message = f"{approval_id}\n{approver}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def valid(self, token: str, approval_id: str, approver: str) -> bool:
        return same_text(token, self.issue(approval_id, approver))
