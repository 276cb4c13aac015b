"""Reviewing a URL-mode elicitation's URL before anything is opened (pure)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from safedb.client.sanitize import clean_text


@dataclass(frozen=True)
class UrlReview:
    url: str
    """The full URL, cleaned of control characters, exactly as it would be opened."""
    host: str
    """The host, in its ASCII (punycode) form, so that look-alike letters cannot hide a different site; with
    `\\u` escapes (and not openable) when it has no faithful ASCII form."""
    openable: bool
    reason: str | None = None
    """Why the URL will not be opened, or a warning about it."""


def review_url(url: str) -> UrlReview:
    """Whether a URL may be opened on the person's consent: https anywhere, http only for this machine."""
    cleaned = clean_text(url, multiline=False)
    try:
        parts = urlsplit(url)
        hostname = parts.hostname or ""
        _ = parts.port
    except ValueError:
        return UrlReview(cleaned, "", False, "the URL cannot be parsed")
    # Browsers read a backslash before the path as "/": `https://evil.example\\.good.example/` opens evil.example.
    host = _ascii_host(hostname) if "\\" not in parts.netloc else None
    if host is None:
        # Before the check below, which would show the host with its invisible characters removed: escaped, the
        # person sees where they are.
        escaped = hostname.encode("ascii", "backslashreplace").decode("ascii")
        return UrlReview(cleaned, escaped, False, "the host has characters that browsers drop or read differently")
    if cleaned != url or any(character.isspace() for character in url):
        return UrlReview(cleaned, "", False, "the URL contains spaces, control or invisible characters")
    if not host:
        return UrlReview(url, host, False, "the URL has no host")
    if parts.username is not None or parts.password is not None:
        return UrlReview(url, host, False, "the URL carries a user name or password before the host")
    if parts.scheme == "https":
        return UrlReview(url, host, True)
    if parts.scheme == "http" and _is_local(host):
        return UrlReview(url, host, True, "plain http, allowed because the host is this machine")
    return UrlReview(url, host, False, f"only https URLs (or http on this machine) are opened, not {parts.scheme}:")


def _ascii_host(hostname: str) -> str | None:
    """The host in ASCII (punycode), or None when no ASCII form is faithful to it.

    Python's IDNA codec and browsers (UTS-46) convert letters alike, but not the characters they drop or
    map: the codec refuses U+2061 that browsers drop, and turns "ß" into "ss" where browsers keep it. A host
    that does not convert back to itself could name another site in the browser than the one shown here.
    """
    if "%" in hostname:
        return None  # browsers percent-decode a host before reading it: `ev%69l.example` is evil.example
    if hostname.isascii():
        return hostname
    try:
        ascii_host = hostname.encode("idna").decode("ascii")
        return ascii_host if ascii_host.encode("ascii").decode("idna") == hostname else None
    except UnicodeError:
        return None


def _is_local(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
