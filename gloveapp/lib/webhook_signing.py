"""Signed webhooks, both ways: HMAC-SHA256 over `f"{timestamp}.{body}"`.

A sender sets `X-Glove-Timestamp: <unix seconds>` and `X-Glove-Signature: sha256=<hex of
HMAC-SHA256(secret, timestamp + "." + raw body)>`. A receiver refuses a timestamp too far
from its clock (a captured request cannot be replayed later; one cannot be re-dated, the
timestamp is signed with the body) and, inside that window, a signature it has seen before
(the same delivery sent again). What we accept (`inbox.webhooks`), what we send (approval
notifications, turn-completion webhooks) and a receiver of ours in Python all use this.
"""

from __future__ import annotations

import hashlib
import hmac
import re

TIMESTAMP_HEADER = "X-Glove-Timestamp"
SIGNATURE_HEADER = "X-Glove-Signature"
SIGNATURE_PREFIX = "sha256="
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")
# How far ahead of the receiver's clock a sender's timestamp may be.
FUTURE_MARGIN_SECONDS = 30


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Glove-Signature` header value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def signature_problem(
    *, secret: str, timestamp: str, signature: str, body: bytes, now: float, max_skew: float
) -> str:
    """Why a signed request is refused ("" when its timestamp and signature are good)."""
    # ASCII digits only, and few of them: str.isdigit() accepts "²", and int() of thousands
    # of digits raises instead of refusing.
    if not UNIX_SECONDS.fullmatch(timestamp):
        return f"{TIMESTAMP_HEADER} must be a Unix time in seconds."
    if now - int(timestamp) > max_skew:
        return (
            f"{TIMESTAMP_HEADER} is more than {max_skew:g} seconds away from the server's "
            "clock; the request is refused as a possible replay."
        )
    ahead = min(FUTURE_MARGIN_SECONDS, max_skew)
    if int(timestamp) - now > ahead:
        return (
            f"{TIMESTAMP_HEADER} is more than {ahead:g} seconds ahead of the server's clock; "
            "the request is refused as a possible replay."
        )
    # Constant-time comparison: timing must not reveal how much of a guess was right. On
    # bytes: compare_digest refuses a str with non-ASCII characters (a header may hold any
    # byte) with a TypeError instead of answering "no match".
    offered = signature.strip().encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(sign(secret, timestamp, body).encode(), offered):
        return f"{SIGNATURE_HEADER} does not match the body."
    return ""


def signature_digest(signature: str) -> str:
    """What a receiver stores to refuse a signature it has seen."""
    return hashlib.sha256(signature.strip().encode("utf-8", "surrogateescape")).hexdigest()
