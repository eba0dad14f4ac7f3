"""A turn's completion webhook: asked for at the start, due at the end, delivered signed.

    turn_webhook_ask(turn=..., url=...)     in the start's transaction
    turn_webhook_due(turn_id=..., outcome=...)  in the end's transaction (every way a turn ends)
    turn_webhooks_deliver()                 the turn worker's scheduler, every sweep

The body names the turn and how it ended:

    {"event": "turn.ended", "deliveryId": "turn-7-ended", "turnId": 7, "sessionId": "<key>",
     "outcome": "done" | "failed" | "cancelled", "error": "", "endedAt": "<ISO time>",
     "attempt": 1}

signed as every webhook we send (`gloveapp.lib.webhook_signing`: `X-Glove-Timestamp`,
`X-Glove-Signature`), with `X-Glove-Event: turn.ended` and `Idempotency-Key: <deliveryId>`.
A turn's end is due once (the conditional update in `turn_webhook_due`); a delivery is
claimed by one worker at a time (a lease) and retried with backoff until the receiver
answers 2xx. A worker killed between the receiver's answer and the row's update sends it
again, signed anew, with the same `deliveryId`: a receiver counts each `deliveryId` once.

An A2A task's push config is a row here of kind `a2a` that is never sent itself: its end,
like each prompt that asks its caller, is a push row of its own (`turns.task_pushes`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from gloveapp.lib import outbox
from gloveapp.turns.models import Turn, TurnWebhook
from gloveapp.turns.signed_posts import TURN_ENDED, post_signed, signing_secret
from gloveapp.turns.task_pushes import A2A_STATES, ENDED_EVENT, task_push_due

logger = logging.getLogger(__name__)

EVENT = TURN_ENDED
LEASE_SECONDS = 30
ENDED = (Turn.Status.DONE, Turn.Status.FAILED, Turn.Status.CANCELLED)
Status = TurnWebhook.Status


def turn_webhook_ask(
    *,
    turn: Turn,
    url: str,
    kind: str = TurnWebhook.Kind.GLOVE,
    config_id: str = "",
    token: str = "",
) -> TurnWebhook:
    """The turn tells `url` when it ends (already ended, as a turn a person answers is: due
    now). One per turn: asking again replaces what was asked, unless it was sent. An A2A
    push config (`kind` a2a) is only the address: its pushes are rows of their own, one per
    state change (`turns.task_pushes`), and the row stays `waiting`."""
    ended = turn.status in ENDED
    a2a = kind == TurnWebhook.Kind.A2A
    TurnWebhook.objects.filter(turn=turn).exclude(status=Status.SENT).delete()
    row = TurnWebhook.objects.create(
        turn=turn,
        url=url,
        kind=kind,
        config_id=config_id,
        token=token,
        status=Status.PENDING if ended and not a2a else Status.WAITING,
        outcome=turn.status if ended else "",
        ended_at=turn.finished_at if ended else None,
        next_attempt_at=timezone.now() if ended and not a2a else None,
    )
    if ended and a2a:
        task_push_due(turn_id=turn.pk, event=ENDED_EVENT, state=A2A_STATES[turn.status])
    return row


def turn_webhook_due(*, turn_id: int, outcome: str) -> bool:
    """The turn ended (`outcome`): its webhook, if it asked for one, is due. Conditional on
    `waiting`, so a turn's end is due once, whoever ends it. An A2A push config's end is a
    push row of its own (`turns.task_pushes`), unique by event."""
    now = timezone.now()
    rows = TurnWebhook.objects.filter(turn_id=turn_id, status=Status.WAITING)
    if task_push_due(turn_id=turn_id, event=ENDED_EVENT, state=A2A_STATES.get(outcome, "")):
        rows.filter(kind=TurnWebhook.Kind.A2A).update(outcome=outcome, ended_at=now)
        return True
    return bool(
        rows.exclude(kind=TurnWebhook.Kind.A2A).update(
            status=Status.PENDING, outcome=outcome, ended_at=now, next_attempt_at=now
        )
    )


def delivery_id(turn_id: int) -> str:
    return f"turn-{turn_id}-ended"


def webhook_body(row: TurnWebhook) -> dict[str, Any]:
    turn = row.turn
    if row.kind == TurnWebhook.Kind.A2A:
        # A2A's push notification: a StreamResponse with the task as it ended.
        return {
            "task": {
                "id": str(turn.pk),
                "contextId": turn.session.key,
                "status": {
                    "state": A2A_STATES.get(row.outcome, "TASK_STATE_UNSPECIFIED"),
                    "timestamp": (row.ended_at or timezone.now()).isoformat(),
                },
                "metadata": {"deliveryId": delivery_id(turn.pk), "attempt": row.attempts},
            }
        }
    return {
        "event": EVENT,
        "deliveryId": delivery_id(turn.pk),
        "turnId": turn.pk,
        "sessionId": turn.session.key,
        "outcome": row.outcome,
        "error": turn.error if row.outcome != Turn.Status.DONE else "",
        "endedAt": (row.ended_at or timezone.now()).isoformat(),
        # Each try's body differs, so two tries within a second are signed differently and
        # a receiver's replay check does not refuse the retry.
        "attempt": row.attempts,
    }


def turn_webhooks_deliver(*, now: datetime | None = None, limit: int = 50) -> int:
    """Send the due completion webhooks; returns how many the receivers took."""
    secret = signing_secret()
    if not secret:
        return 0
    return outbox.deliver_due(
        TurnWebhook,
        now=now or timezone.now(),
        limit=limit,
        lease_seconds=LEASE_SECONDS,
        max_attempts=settings.GLOVE_TURN_WEBHOOK_MAX_ATTEMPTS,
        load=lambda pk: TurnWebhook.objects.select_related("turn", "turn__session").get(pk=pk),
        send=lambda row: _send(row, secret),
        what="turn webhook",
        order=("next_attempt_at",),
    )


def _send(row: TurnWebhook, secret: str) -> None:
    post_signed(
        url=row.url,
        body=webhook_body(row),
        secret=secret,
        delivery=delivery_id(row.turn_id),
        a2a_token=row.token if row.kind == TurnWebhook.Kind.A2A else "",
        event=EVENT,
    )
