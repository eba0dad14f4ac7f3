"""The turns' public entry points: queue a message, read and answer prompts, wait, cancel.

    ahead = await submit_message(session_id=..., text="Do you have Yirgacheffe?")
    visible_slots(session_id)            # the prompts a page shows right now
    await answer_slot(session_id=..., slot_id="t12-slot_1", value="confirm")
    is_busy(session_id), queued(session_id)

Turns run on a worker (`manage.py turn_worker`, started by `make run`; `turns.engine`), never
in the caller: everything here reads and writes the database and puts the session on the
queue (`turns.queue`), so it works the same from any process.
Live events: stored ones (`turn.started`, `turn.restarted`, `turn.waiting` (parked on a
person), `turn.resumed` (answered, back on the queue), `turn.finished`, `turn.error`,
`slot.pushed`, `slot.resolved`, and the messages) reach pages through the event log; the
worker pushes `text_delta`, `tool_use` and `tool_use_result` through the channel layer only.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from gloveapp.conversations.models import Session
from gloveapp.turns import lifecycle, slots, submit, webhooks
from gloveapp.turns.queue.tasks import enqueue_session
from gloveapp.turns.selectors import SlotView, is_busy, queued, visible_slots
from gloveapp.turns.submit import QueuedTurn, QueueFull, TurnLimitReached

__all__ = [
    "QueueFull",
    "SlotView",
    "TurnLimitReached",
    "answer_slot",
    "cancel",
    "is_busy",
    "queued",
    "start_turn_sync",
    "submit_message",
    "submit_message_sync",
    "visible_slots",
    "wait_until_idle",
    "wake_mesh_peer_sync",
]


def submit_message_sync(
    *, session_id: str, text: str, user_id: int | None = None, source: str = "python"
) -> int:
    """Queue `text` as the session's next turn and enqueue its task; returns how many turns
    are ahead of it. The user's turn limit applies (the session's owner by default)."""
    if user_id is None:
        user_id = Session.objects.values_list("owner_id", flat=True).get(pk=session_id)
    queued = submit.turn_submit(session_id=session_id, text=text, user_id=user_id, source=source)
    # After commit: a caller may hold a transaction around this (an idempotent post keeps
    # its key with the turn), and a worker must not look for the turn before it is there.
    transaction.on_commit(partial(enqueue_session, session_id), robust=True)
    return queued.ahead


def start_turn_sync(
    *,
    session_id: str,
    text: str,
    user_id: int | None,
    source: str = "api",
    webhook_url: str | None = None,
) -> QueuedTurn:
    """`submit_message_sync` for a caller that follows the turn: returns the queued turn
    (with `ahead`: how many turns run or wait before it, and its `turn.queued` event). The
    task is enqueued at commit. `webhook_url`: told, signed, when the turn ends
    (`turns.webhooks`)."""
    queued = submit.turn_submit(session_id=session_id, text=text, user_id=user_id, source=source)
    if webhook_url:
        webhooks.turn_webhook_ask(turn=queued.turn, url=webhook_url)
    transaction.on_commit(partial(enqueue_session, session_id), robust=True)
    return queued


async def submit_message(
    *, session_id: str, text: str, user_id: int | None = None, source: str = "python"
) -> int:
    return await sync_to_async(submit_message_sync)(
        session_id=session_id, text=text, user_id=user_id, source=source
    )


def wake_mesh_peer_sync(*, session_id: str, text: str) -> bool:
    """Queue a wake-up turn of a mesh peer's inbox session (`run_agent`); False when a
    queued turn will read the new mail anyway. Counts against the session owner's turn
    limit, or GLOVE_MESH_TURNS_PER_MINUTE for a peer nobody owns (`TurnLimitReached`)."""
    user_id = Session.objects.values_list("owner_id", flat=True).get(pk=session_id)
    turn = submit.turn_wake(session_id=session_id, text=text, user_id=user_id)
    if turn is None:
        return False
    enqueue_session(turn.session_id)
    return True


async def answer_slot(
    *,
    session_id: str,
    slot_id: str,
    value: Any = None,
    dismiss: bool = False,
    by: str = "",
    via: str = "",
) -> bool:
    """Answer a waiting prompt; False when nothing waits on it (answered, expired, unknown).
    A permission prompt takes one of `permissions.PERMISSION_CHOICES` ("once", "always",
    "deny_once", "always_deny"), or Glove's "deny" (remembered) and booleans.
    `dismiss`: close it unanswered, as Glove's `reject(slotId)`: the waiting tool throws and
    is run again (it may ask again); a permission prompt reads it as "no" for that call.
    `by`, `via`: who answered and through which edge (the wait's span and timeline step)."""
    return await sync_to_async(slots.slot_answer)(
        session_id=session_id, public_id=slot_id, value=value, dismiss=dismiss, by=by, via=via
    )


async def cancel(session_id: str, *, user_id: int | None = None) -> bool:
    return await sync_to_async(lifecycle.turn_cancel)(session_id=session_id, user_id=user_id)


async def wait_until_idle(session_id: str, *, poll: float = 0.01) -> None:
    """Wait until no turn of the session is queued or running (tests, scripts)."""
    while await sync_to_async(is_busy)(session_id):  # noqa: ASYNC110 (state in the database)
        await asyncio.sleep(poll)
