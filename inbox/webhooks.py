"""Signed webhooks: HMAC-SHA256 over `f"{timestamp}.{body}"` with GLOVE_WEBHOOK_SECRET.

A sender sets `X-Glove-Timestamp: <unix seconds>` and
`X-Glove-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + raw body)>`.
Signing the timestamp with the body means an old request cannot be re-dated; requests whose
timestamp is more than GLOVE_WEBHOOK_MAX_SKEW_SECONDS away from now are refused, so a
captured request cannot be replayed later (and inside the window a replayed resolution
meets "already resolved").
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

TIMESTAMP_HEADER = "X-Glove-Timestamp"
SIGNATURE_HEADER = "X-Glove-Signature"
SIGNATURE_PREFIX = "sha256="
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


class WebhookCaller:
    """Stands in for `request.user` on a signed request: a service, not a person."""

    is_authenticated = True
    is_staff = False
    is_anonymous = False
    pk = None

    def __str__(self) -> str:
        return "signed webhook"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Glove-Signature` header value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def verify(*, secret: str, timestamp: str, signature: str, body: bytes, now: float) -> None:
    """Raise AuthenticationFailed unless the signature and timestamp are acceptable."""
    # ASCII digits only, and few of them: str.isdigit() accepts "²", and int() of thousands
    # of digits raises instead of refusing.
    if not UNIX_SECONDS.fullmatch(timestamp):
        raise exceptions.AuthenticationFailed(f"{TIMESTAMP_HEADER} must be a Unix time in seconds.")
    skew = settings.GLOVE_WEBHOOK_MAX_SKEW_SECONDS
    if abs(now - int(timestamp)) > skew:
        raise exceptions.AuthenticationFailed(
            f"{TIMESTAMP_HEADER} is more than {skew} seconds away from the server's clock; "
            "the request is refused as a possible replay."
        )
    # Constant-time comparison: timing must not reveal how much of a guess was right. On
    # bytes: compare_digest refuses a str with non-ASCII characters (a header may hold any
    # byte) with a TypeError instead of answering "no match".
    offered = signature.strip().encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(sign(secret, timestamp, body).encode(), offered):
        raise exceptions.AuthenticationFailed(f"{SIGNATURE_HEADER} does not match the body.")


class WebhookSignatureAuthentication(BaseAuthentication):
    """Authenticates requests that carry a signature; others fall through to the next class."""

    def authenticate(self, request: Request):
        signature = request.headers.get(SIGNATURE_HEADER)
        if signature is None:
            return None
        secret = settings.GLOVE_WEBHOOK_SECRET
        if not secret:
            raise exceptions.AuthenticationFailed(
                "Signed webhooks are not configured on this server (GLOVE_WEBHOOK_SECRET is unset)."
            )
        verify(
            secret=secret,
            timestamp=request.headers.get(TIMESTAMP_HEADER, ""),
            signature=signature,
            body=request._request.body,  # the raw bytes, before any parsing
            now=time.time(),
        )
        return (WebhookCaller(), "webhook")

    def authenticate_header(self, request: Request) -> str:
        return 'Glove-Signature realm="api"'
