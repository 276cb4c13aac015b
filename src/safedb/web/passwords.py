"""Approver passwords, stored as salted PBKDF2-SHA256 hashes."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

_SCHEME = "pbkdf2_sha256"
_ITERATIONS = 600_000
MAX_ITERATIONS = 10_000_000
"""The most rounds a stored hash may ask for. `safedb approver-hash` uses 600,000 (OWASP's advice for PBKDF2-SHA256
in 2023), a fifth of a second or so per check; this leaves room to raise that for years. A count far above it (a
few digits too many) would make every sign-in hold one of the two password-check slots (web/security.py) for
minutes or hours, keeping every approver out."""
_DIGEST_BYTES = hashlib.sha256().digest_size
_ROUNDS = re.compile(r"[0-9]{1,9}")  # bounded, so that int() never meets thousands of digits
_BASE64 = re.compile(r"[A-Za-z0-9_-]+")  # URL-safe, unpadded: as _b64 writes it


def hash_password(password: str, *, iterations: int = _ITERATIONS) -> str:
    """`pbkdf2_sha256$ITERATIONS$SALT$HASH`, for the configuration file."""
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return "$".join((_SCHEME, str(iterations), _b64(salt), _b64(digest)))


def verify_password(stored: str, password: str) -> bool:
    """True when `password` matches the stored hash (compared in constant time); False, never an error, when what
    is stored is not such a hash."""
    parsed = _parsed(stored)
    if parsed is None:
        return False
    iterations, salt, digest = parsed
    computed = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return hmac.compare_digest(computed, digest)


def is_password_hash(stored: str) -> bool:
    """Whether `stored` is a hash as `hash_password` writes it, with at most MAX_ITERATIONS rounds."""
    return _parsed(stored) is not None


def _parsed(stored: str) -> tuple[int, bytes, bytes] | None:
    """The rounds, salt and digest of a stored hash; None for anything `hash_password` could not have written."""
    parts = stored.split("$")
    if len(parts) != 4 or parts[0] != _SCHEME or not _ROUNDS.fullmatch(parts[1]):
        return None
    iterations, salt, digest = int(parts[1]), _unb64(parts[2]), _unb64(parts[3])
    if not 1 <= iterations <= MAX_ITERATIONS or not salt or digest is None or len(digest) != _DIGEST_BYTES:
        return None
    return iterations, salt, digest


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes | None:
    if not _BASE64.fullmatch(text):
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:  # one character more than a multiple of four: no bytes encode to that
        return None
