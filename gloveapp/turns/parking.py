"""Parked on a person: a running turn that waits on a prompt or an approval gives up its
worker (`waiting`, no lease), and goes back on the queue when an answer, a decision, a stop or
an expiry arrives."""

from __future__ import annotations

from enum import StrEnum

from django.db import transaction
from django.db.models import F

from gloveapp.approvals import services as approvals
from gloveapp.lib import turn_waking
from gloveapp.observe.cost import Usage
from gloveapp.turns.events import turn_event
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.session_usage import add_session_usage


class Park(StrEnum):
    """What `turn_park` did with the turn."""

    PARKED = "parked"
    # Something it waits on was answered (or a stop asked) before it could park: it goes on.
    ANSWERED = "answered"
    LOST = "lost"  # no longer this attempt's (taken back)


def turn_park(
    *,
    turn: Turn,
    worker_id: str,
    slot_ids: list[str],
    usage: Usage | None = None,
    model: str = "",
) -> Park:
    """Park a running turn that waits on a person: `waiting`, no worker, no lease. What it
    waits on (its open slots and approval requests) stays open under the same ids; an
    answer, a decision, a Stop or an expiry puts it back on the queue (`turn_unpark`) and the
    next attempt continues from the stored conversation. `slot_ids`: the slots it waits on.

    The turn's row is locked while the answers are looked for, and `turn_unpark` takes the
    same lock after storing an answer: an answer either is seen here (ANSWERED: the turn
    goes on where it runs) or finds the turn parked and unparks it. Never both, never lost.
    `usage`: the tokens this attempt used, kept on the turn (the one that finishes it adds
    its own), so a turn that waited on a person costs all its model calls; and added to the
    session's usage of `model`, as `turn_finish` adds the finishing attempt's."""
    with transaction.atomic():
        held = (
            Turn.objects.select_for_update()
            .filter(
                pk=turn.pk,
                status=Turn.Status.RUNNING,
                worker_id=worker_id,
                attempts=turn.attempts,
            )
            .values_list("cancel_requested", flat=True)
            .first()
        )
        if held is None:
            return Park.LOST
        if held or _answers_waiting(turn.pk, slot_ids):
            return Park.ANSWERED
        usage = usage or Usage()
        Turn.objects.filter(pk=turn.pk).update(
            status=Turn.Status.WAITING,
            worker_id="",
            lease_until=None,
            tokens_in=F("tokens_in") + usage.tokens_in,
            tokens_out=F("tokens_out") + usage.tokens_out,
            cache_read_tokens=F("cache_read_tokens") + usage.cache_read,
            cache_write_tokens=F("cache_write_tokens") + usage.cache_write,
        )
        add_session_usage(turn.session_id, model, usage)
        turn_event(turn, "turn.waiting", {"turn": turn.pk})
    return Park.PARKED


def _answers_waiting(turn_id: int, slot_ids: list[str]) -> bool:
    return TurnSlot.objects.filter(
        turn_id=turn_id, slot_id__in=slot_ids, status=TurnSlot.Status.ANSWERED
    ).exists() or approvals.decided_for_turn(turn_id, slot_ids)


def turn_unpark(*, turn_id: int) -> str | None:
    """An answer to what the turn waits on was stored in this transaction: a parked turn
    goes back on the queue (returns its session, whose task the caller enqueues at commit);
    a running one's worker is told to look (None)."""
    row = (
        Turn.objects.select_for_update()
        .filter(pk=turn_id)
        .values_list("status", "session_id")
        .first()
    )
    if row is None:
        return None
    status, session_id = row
    if status != Turn.Status.WAITING:
        turn_waking.notify_turn_worker(turn_id)
        return None
    Turn.objects.filter(pk=turn_id, status=Turn.Status.WAITING).update(
        status=Turn.Status.QUEUED, resumes=F("resumes") + 1, restarting=False
    )
    turn_event(Turn(id=turn_id, session_id=session_id), "turn.resumed", {"turn": turn_id})
    return session_id
