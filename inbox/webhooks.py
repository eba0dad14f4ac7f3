"""Signed webhooks: HMAC-SHA256 over `f"{timestamp}.{body}"` with GLOVE_WEBHOOK_SECRET.

A sender sets `X-Glove-Timestamp: <unix seconds>` and
`X-Glove-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + raw body)>`.
Signing the timestamp with the body means an old request cannot be re-dated; requests whose
timestamp is more than GLOVE_WEBHOOK_MAX_SKEW_SECONDS away from now are refused, so a
captured request cannot be replayed later; inside that window each signature is accepted
once (`UsedWebhookSignature`): the same signed request sent again is refused, whatever
it asks. A sender signs every request anew (a retry too: a fresh timestamp is a fresh
signature). A timestamp may be ahead of the server's clock by FUTURE_MARGIN_SECONDS at most
(clocks a little apart), never by the whole window: the used-signature record, kept twice
the window from its use, then always outlives the signature's validity. A signed body whose
JSON repeats a key is refused: which of the two a parser keeps is its own choice, and the
signer may have meant the other (a decision for one `requestId` read as for another).

This secret is what we ACCEPT. What we send (approval notifications to chat tools) is signed
with GLOVE_APPROVAL_WEBHOOK_SECRET, and a system check refuses the same secret for both,
so a receiver of our notifications can never forge a request we accept.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from gloveapp.lib import webhook_signing
from inbox.models import UsedWebhookSignature

TIMESTAMP_HEADER = webhook_signing.TIMESTAMP_HEADER
SIGNATURE_HEADER = webhook_signing.SIGNATURE_HEADER
sign = webhook_signing.sign  # the one signature (gloveapp.lib.webhook_signing)
FUTURE_MARGIN_SECONDS = webhook_signing.FUTURE_MARGIN_SECONDS


class WebhookCaller:
    """Stands in for `request.user` on a signed request: a service, not a person."""

    is_authenticated = True
    is_staff = False
    is_anonymous = False
    pk = None

    def __str__(self) -> str:
        return "signed webhook"


def verify(*, secret: str, timestamp: str, signature: str, body: bytes, now: float) -> None:
    """Raise AuthenticationFailed unless the signature and timestamp are acceptable."""
    problem = webhook_signing.signature_problem(
        secret=secret,
        timestamp=timestamp,
        signature=signature,
        body=body,
        now=now,
        max_skew=settings.GLOVE_WEBHOOK_MAX_SKEW_SECONDS,
    )
    if problem:
        raise exceptions.AuthenticationFailed(problem)


REPLAYED = (
    f"This {SIGNATURE_HEADER} was already used: a signed request is accepted once. "
    "Sign each request anew."
)


def accept_once(signature: str, *, now: float) -> None:
    """Record a verified signature as used; AuthenticationFailed if it was already.

    The primary key is the arbiter: of two requests carrying one signature at the same
    moment (two servers), exactly one insert succeeds."""
    digest = webhook_signing.signature_digest(signature)
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


def refuse_repeated_keys(body: bytes) -> None:
    """A 400 naming the first key a signed JSON body repeats (at any depth). A body that is
    no JSON is left to the route's parser to refuse."""

    def pairs(items: list[tuple[str, object]]) -> dict:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise exceptions.ValidationError(
                    {key: ["This key appears more than once in the signed body."]}
                )
            seen.add(key)
        return dict(items)

    try:
        json.loads(body, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return


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
        refuse_repeated_keys(request._request.body)
        accept_once(signature, now=now)
        return (WebhookCaller(), "webhook")

    def authenticate_header(self, request: Request) -> str:
        return 'Glove-Signature realm="api"'
