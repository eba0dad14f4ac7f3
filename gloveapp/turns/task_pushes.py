"""A2A push notifications: a row per state change of a task that has a push config.

    task_push_due(turn_id=..., event=..., state=...)  in the change's own transaction
    turn_pushes_deliver()                             the turn worker's scheduler, every sweep

A task's push config is its turn's `TurnWebhook` of kind `a2a` (url, token, id). A2A pushes
the changes a disconnected client must act on: each prompt that asks the caller
(`input-required`, from `turns.slots.slot_push`) and the end (`completed`, `failed`,
`canceled`, from `turns.webhooks.turn_webhook_due`). Each is a `TurnPush` row, unique by
`(turn, event)`: written in the same transaction as the slot or the end, so a retried
attempt that pushes the same slot again, or a second ender, adds nothing. The body is A2A's
`StreamResponse`, the task as it is at that change:

    {"task": {"id": "7", "contextId": "<key>",
              "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "<ISO time>"},
              "metadata": {"deliveryId": "turn-7-input-required-t7-<slot>", "attempt": 1,
                           "slotId": "t7-<slot>"}}}

with the config's token in `X-A2A-Notification-Token`, `X-Glove-Event: task.input_required`
or `turn.ended`, signed and retried as the completion webhook (`turns.webhooks.post_signed`); `Idempotency-Key` and `metadata.deliveryId` name the
event (the end's is `turn-<id>-ended`, as before), so a receiver counts each once. A push
whose config was deleted before it went is dropped, not sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from gloveapp.lib import outbox
from gloveapp.turns.models import Turn, TurnPush, TurnWebhook
from gloveapp.turns.signed_posts import TURN_ENDED, post_signed, signing_secret

ENDED_EVENT = "ended"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
# A push names the task's state in A2A's words.
A2A_STATES = {
    Turn.Status.DONE: "TASK_STATE_COMPLETED",
    Turn.Status.FAILED: "TASK_STATE_FAILED",
    Turn.Status.CANCELLED: "TASK_STATE_CANCELED",
}
# `X-Glove-Event` of an input-required push (the end's is `turn.ended`, as the webhook's).
INPUT_REQUIRED_EVENT = "task.input_required"
LEASE_SECONDS = 30


def input_required_event(public_slot_id: str) -> str:
    """The event of a prompt that asks the caller, by the slot's public id (`t7-<slot>`)."""
    return f"input-required:{public_slot_id}"


def task_push_due(*, turn_id: int, event: str, state: str) -> bool:
    """The task of `turn_id` changed (`event`, now in `state`): a push is due if it has an
    A2A push config. Once per event: a second call for the same event adds nothing."""
    if not TurnWebhook.objects.filter(turn_id=turn_id, kind=TurnWebhook.Kind.A2A).exists():
        return False
    now = timezone.now()
    # Race: a second ender, or a continuing attempt pushing the same prompt: the unique
    # (turn, event) keeps one row, and get_or_create's savepoint reads it back.
    _, created = TurnPush.objects.get_or_create(
        turn_id=turn_id,
        event=event,
        defaults={"state": state, "happened_at": now, "next_attempt_at": now},
    )
    return created


def delivery_id(push: TurnPush) -> str:
    if push.event == ENDED_EVENT:
        return f"turn-{push.turn_id}-ended"
    return f"turn-{push.turn_id}-{push.event.replace(':', '-')}"


def push_body(push: TurnPush) -> dict[str, Any]:
    turn = push.turn
    metadata: dict[str, Any] = {"deliveryId": delivery_id(push), "attempt": push.attempts}
    _, _, slot_id = push.event.partition(":")
    if slot_id:
        metadata["slotId"] = slot_id
    return {
        "task": {
            "id": str(turn.pk),
            "contextId": turn.session.key,
            "status": {"state": push.state, "timestamp": push.happened_at.isoformat()},
            "metadata": metadata,
        }
    }


def turn_pushes_deliver(*, now: datetime | None = None, limit: int = 50) -> int:
    """Send the due A2A push notifications; returns how many the receivers took."""
    secret = signing_secret()
    if not secret:
        return 0

    def send(push: TurnPush) -> None:
        config = TurnWebhook.objects.filter(turn_id=push.turn_id, kind=TurnWebhook.Kind.A2A).first()
        if config is None:
            return  # its config was deleted: nobody asked for it any more
        post_signed(
            url=config.url,
            body=push_body(push),
            secret=secret,
            delivery=delivery_id(push),
            a2a_token=config.token,
            event=TURN_ENDED if push.event == ENDED_EVENT else INPUT_REQUIRED_EVENT,
        )

    return outbox.deliver_due(
        TurnPush,
        now=now or timezone.now(),
        limit=limit,
        lease_seconds=LEASE_SECONDS,
        max_attempts=settings.GLOVE_TURN_WEBHOOK_MAX_ATTEMPTS,
        load=lambda pk: TurnPush.objects.select_related("turn", "turn__session").get(pk=pk),
        send=send,
        what="A2A push notification",
    )
