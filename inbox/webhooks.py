"""Signed webhooks: HMAC-SHA256 over `f"{timestamp}.{body}"` with GLOVE_WEBHOOK_SECRET.

A sender sets `X-Glove-Timestamp: <unix seconds>` and
`X-Glove-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + raw body)>`.
Signing the timestamp with the body means an old request cannot be re-dated; requests whose
timestamp is more than GLOVE_WEBHOOK_MAX_SKEW_SECONDS away from now are refused, so a
captured request cannot be replayed later; inside that window each signature is accepted
once (`UsedWebhookSignature`): the same signed request sent again is refused, whatever
it asks. A sender signs every request anew (a retry too: a fresh timestamp is a fresh
signature).

This secret is what we ACCEPT. What we send (approval notifications to chat tools) is signed
with GLOVE_APPROVAL_WEBHOOK_SECRET, and a system check refuses the same secret for both,
so a receiver of our notifications can never forge a request we accept.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from inbox.models import UsedWebhookSignature

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


REPLAYED = (
    f"This {SIGNATURE_HEADER} was already used: a signed request is accepted once. "
    "Sign each request anew."
)


def accept_once(signature: str, *, now: float) -> None:
    """Record a verified signature as used; AuthenticationFailed if it was already.

    The primary key is the arbiter: of two requests carrying one signature at the same
    moment (two servers), exactly one insert succeeds."""
    digest = hashlib.sha256(signature.strip().encode("utf-8", "surrogateescape")).hexdigest()
    try:
        with transaction.atomic():
            UsedWebhookSignature.objects.create(
                digest=digest, used_at=datetime.fromtimestamp(now, tz=UTC)
            )
    except IntegrityError:
        raise exceptions.AuthenticationFailed(REPLAYED) from None


def used_signatures_prune(*, now: datetime | None = None) -> int:
    """Forget signatures whose timestamp window has passed (they are refused as too old
    anyway); returns how many. Kept twice the window, for clocks a little apart."""
    now = now or datetime.now(tz=UTC)
    horizon = now - timedelta(seconds=2 * settings.GLOVE_WEBHOOK_MAX_SKEW_SECONDS)
    deleted, _ = UsedWebhookSignature.objects.filter(used_at__lt=horizon).delete()
    return deleted


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
        now = time.time()
        verify(
            secret=secret,
            timestamp=request.headers.get(TIMESTAMP_HEADER, ""),
            signature=signature,
            body=request._request.body,  # the raw bytes, before any parsing
            now=now,
        )
        accept_once(signature, now=now)
        return (WebhookCaller(), "webhook")

    def authenticate_header(self, request: Request) -> str:
        return 'Glove-Signature realm="api"'
