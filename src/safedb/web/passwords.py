"""Approver passwords, stored as salted PBKDF2-SHA256 hashes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

_SCHEME = "pbkdf2_sha256"
_ITERATIONS = 600_000


def hash_password(password: str, *, iterations: int = _ITERATIONS) -> str:
    """`pbkdf2_sha256$ITERATIONS$SALT$HASH`, for the configuration file."""
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return "$".join((_SCHEME, str(iterations), _b64(salt), _b64(digest)))


def verify_password(stored: str, password: str) -> bool:
    """True when `password` matches the stored hash (compared in constant time)."""
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != _SCHEME:
            return False
        computed = hashlib.pbkdf2_hmac("sha256", password.encode(), _unb64(salt), int(iterations))
    except ValueError:
        return False
    return hmac.compare_digest(computed, _unb64(digest))


def is_password_hash(stored: str) -> bool:
    parts = stored.split("$")
    return len(parts) == 4 and parts[0] == _SCHEME and parts[1].isdigit()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
