"""A webhook we send, signed: the turns' completion webhooks and the A2A tasks' pushes.

Signed as every webhook we send (`gloveapp.lib.webhook_signing`: `X-Glove-Timestamp`,
`X-Glove-Signature`) with a key of their own (GLOVE_TURN_WEBHOOK_SECRET), never the one
we accept.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings

from gloveapp.lib import webhook_signing

TURN_ENDED = "turn.ended"
SEND_TIMEOUT_SECONDS = 10


def signing_secret() -> str:
    """The key our webhooks are signed with; "" while none of their own is set."""
    secret = settings.GLOVE_TURN_WEBHOOK_SECRET
    if not secret or secret == settings.GLOVE_WEBHOOK_SECRET:
        # Unsigned, or signed with what we accept (a receiver could forge our webhooks):
        # they wait until a key of their own is set.
        return ""
    return secret


def post_signed(
    *, url: str, body: dict[str, Any], secret: str, delivery: str, a2a_token: str, event: str
) -> None:
    """POST `body` signed, with `X-Glove-Event: <event>` and `Idempotency-Key: <delivery>`
    (raises unless the receiver answers 2xx); `a2a_token`: what the A2A client asked to get
    back, in `X-A2A-Notification-Token`."""
    import httpx

    content = json.dumps(body, ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        webhook_signing.TIMESTAMP_HEADER: timestamp,
        webhook_signing.SIGNATURE_HEADER: webhook_signing.sign(secret, timestamp, content),
        "X-Glove-Event": event,
        "Idempotency-Key": delivery,
    }
    if a2a_token:
        headers["X-A2A-Notification-Token"] = a2a_token
    response = httpx.post(url, content=content, headers=headers, timeout=SEND_TIMEOUT_SECONDS)
    if response.status_code >= 300:
        raise RuntimeError(f"the webhook answered {response.status_code}")
