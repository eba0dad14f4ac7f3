"""Slots: what a turn's display pushes (prompts, cards, approval requests) stored as rows,
found again by a continuing attempt, answered from any process and closed or expired."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db import transaction

from gloveapp.agents.labels import call_summary, tool_label
from gloveapp.approvals import services as approvals
from gloveapp.conversations.models import Session
from gloveapp.core import input_rules
from gloveapp.core.approvals.permissions import permission_decision
from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.lib import turn_waking
from gloveapp.turns.events import turn_event
from gloveapp.turns.fence import turn_holds
from gloveapp.turns.models import LIVE_STATUSES, Turn, TurnSlot
from gloveapp.turns.permissions import PERMISSION_ANSWERS
from gloveapp.turns.task_pushes import INPUT_REQUIRED, input_required_event, task_push_due

# What a slot's answer may land on: a turn running, parked on a person, or back on the queue
# (answered meanwhile, or taken back from a dead worker): its next attempt finds the answer.
ANSWERABLE_STATUSES = LIVE_STATUSES


class KeptSlot(NamedTuple):
    """A slot an earlier attempt of the turn pushed (`turn_slots_kept`)."""

    slot_id: str
    call_id: str | None
    renderer: str
    status: str
    waits_for_answer: bool


def turn_slots_kept(turn: Turn) -> list[KeptSlot]:
    """The slots earlier attempts of the turn pushed.
    A continuing attempt gives a slot its tool pushes again the same id, so it finds the
    same row (and the same approval request, its answer or decision) instead of a new one."""
    if not turn.continues:
        return []
    rows = TurnSlot.objects.filter(turn_id=turn.pk).order_by("pk").values_list(*KeptSlot._fields)
    return [KeptSlot(*row) for row in rows]


# -- slots ----------------------------------------------------------------------------------
def slot_public_id(turn_id: int, slot_id: str) -> str:
    return f"t{turn_id}-{slot_id}"


def calls_waiting(kept: list[KeptSlot]) -> frozenset[str]:
    """The calls (the turn's own, or a subagent's on its turn) that were waiting on a person
    (a prompt still open or answered, of `turn_slots_kept`): the continuing attempt runs
    them again, even when not `retry_safe`, and they find their answers."""
    pending = (TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED)
    return frozenset(
        slot.call_id
        for slot in kept
        if slot.call_id and slot.waits_for_answer and slot.status in pending
    )


# A slot an attempt closed: a later attempt that pushes it again waits on nothing.
CLOSED_SLOT_STATUSES = frozenset(
    {TurnSlot.Status.RESOLVED, TurnSlot.Status.REJECTED, TurnSlot.Status.EXPIRED}
)


@dataclass(frozen=True, slots=True)
class Kept:
    """What `slot_push` found of a slot an earlier attempt pushed (the same id): its row and,
    when it was answered or decided, the answer the waiting tool takes at once (or, when
    the customer dismissed it, `dismissed`: the tool's wait is rejected)."""

    row: TurnSlot
    answered: bool
    answer: Any
    dismissed: bool = False


def slot_push(*, turn: Turn, slot: Any, template: str) -> TurnSlot | Kept | None:
    """Store a slot the turn's display pushed; None (nothing stored) when this attempt of
    the turn is no longer its worker's (taken back: the retry shows its own). A slot an
    earlier attempt stored under this id is found again (`Kept`): no second row, no second
    request, no second notification."""
    with transaction.atomic():
        if turn.worker_id and not turn_holds(turn):
            return None
        kept = TurnSlot.objects.filter(turn_id=turn.pk, slot_id=slot.id).first()
        if kept is not None:
            return _found_again(kept)
        shown = slot.input
        if slot.renderer == APPROVAL_RENDERER and isinstance(slot.input, dict):
            # The request staff decide on is its own row; the chat keeps what a customer
            # may see of it. Only `approval_decide` answers it, never the chat.
            request = approvals.approval_open(
                session_id=turn.session_id,
                prompt=slot.input,
                turn_id=turn.pk,
                slot_id=slot.id,
                call_id=slot.call_id,
            )
            shown = approvals.customer_prompt(slot.input, request)
        elif slot.renderer == PERMISSION_RENDERER and isinstance(slot.input, dict):
            shown = {**slot.input, **_call_reading(turn, slot.input)}
        row = TurnSlot.objects.create(
            turn=turn,
            session_id=turn.session_id,
            slot_id=slot.id,
            renderer=slot.renderer,
            input=shown,
            tool_name=slot.tool_name,
            call_id=slot.call_id,
            display_strategy=slot.display_strategy,
            waits_for_answer=slot.waits_for_answer,
            template=template,
        )
        turn_event(turn, "slot.pushed", {"slot_id": slot_public_id(turn.pk, slot.id)})
        if row.waits_for_answer and row.renderer != APPROVAL_RENDERER:
            # The task now asks its caller (A2A's `input-required`): a push, if it has a config.
            task_push_due(
                turn_id=turn.pk,
                event=input_required_event(slot_public_id(turn.pk, slot.id)),
                state=INPUT_REQUIRED,
            )
    return row


def _call_reading(turn: Turn, prompt: dict[str, Any]) -> dict[str, Any]:
    """The label and summary a customer reads of a pending call, beside its arguments."""
    agent_name = Session.objects.filter(pk=turn.session_id).values_list("agent_name", flat=True)
    name = agent_name.first()
    tool_name = str(prompt.get("toolName") or "")
    summary = call_summary(name, tool_name, prompt.get("toolInput"))
    return {
        "label": tool_label(name, tool_name),
        "summary": (summary.customer or summary.text) if summary else None,
    }


def _found_again(row: TurnSlot) -> Kept:
    if row.renderer == APPROVAL_RENDERER:
        decision = approvals.decision_for_slot(turn_id=row.turn_id, slot_id=row.slot_id)
        return Kept(row, decision is not None, decision)
    answered = row.status in (TurnSlot.Status.ANSWERED, TurnSlot.Status.RESOLVED) and isinstance(
        row.answer, dict
    )
    return Kept(
        row,
        answered,
        row.answer.get("value") if answered else None,
        dismissed=answered and is_dismissal(row.answer),
    )


def slot_close(*, turn: Turn, slot_id: str, status: str) -> None:
    """The worker's display dropped the slot (answered, completed, rejected). Nothing when
    this attempt of the turn is no longer its worker's: a stale attempt (its worker froze
    past the lease) drops its slots as it stops, and the retry waits on the same rows."""
    with transaction.atomic():
        if turn.worker_id and not turn_holds(turn):
            return
        # "removed": the turn dropped it unanswered (stopped, aborted): it can expire only.
        closed_as = {
            "resolved": TurnSlot.Status.RESOLVED,
            "rejected": TurnSlot.Status.REJECTED,
        }.get(status, TurnSlot.Status.EXPIRED)
        closed = TurnSlot.objects.filter(
            turn=turn,
            slot_id=slot_id,
            status__in=[TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED],
        ).update(status=closed_as)
        if closed:
            turn_event(turn, "slot.resolved", {"slot_id": slot_public_id(turn.pk, slot_id)})
        approvals.approval_delivered(turn_id=turn.pk, slot_id=slot_id)


# A slot's public id: "t<turn pk>-<slot id>" (ASCII digits only: "²".isdigit() is true).
_PUBLIC_SLOT_ID = re.compile(r"t([0-9]{1,18})-(.+)", re.DOTALL)
_SLOT_ID_LENGTH = TurnSlot._meta.get_field("slot_id").max_length


def slot_address(public_id: str) -> tuple[int, str] | None:
    """(turn pk, slot id) of a slot's public id, or None when it could name no slot."""
    match = _PUBLIC_SLOT_ID.fullmatch(public_id)
    if match is None or not input_rules.could_name_a_row(match[2], max_length=_SLOT_ID_LENGTH):
        return None
    return int(match[1]), match[2]


# A dismissed slot's stored answer. The worker then rejects the tool's wait, as Glove's
# `reject(slotId)` does (contract §6.1): the waiting tool throws, and the executor runs it
# again (§2.3: up to 3 more times; it may ask again with a fresh slot). A dismissed
# permission prompt is a "no" for that call only, nothing remembered.
DISMISSED_ANSWER: dict[str, Any] = {"dismissed": True}


def is_dismissal(answer: Any) -> bool:
    """Is this stored answer (a TurnSlot's `answer`) a dismissal?"""
    return isinstance(answer, dict) and answer.get("dismissed") is True and "value" not in answer


def slot_answer(
    *,
    session_id: str,
    public_id: str,
    value: Any = None,
    dismiss: bool = False,
    by: str = "",
    via: str = "",
) -> bool:
    """Answer a waiting prompt from any process; the worker running its turn picks it up.
    `dismiss`: close it unanswered instead (`DISMISSED_ANSWER`), whatever its renderer but
    an approval's. `by` and `via`: who answered (a username) and through which edge
    (`page`, `rest`). False when nothing waits on it (answered already, expired, unknown);
    ValueError when the answer is no storable JSON (NaN, NUL, lone surrogates), or a
    permission decision that is malformed (`DecisionRefused`: a decision other than
    approve/reject, a reason that is not text)."""
    address = slot_address(public_id)
    if address is None:
        return False
    turn_pk, slot_id = address
    if not dismiss:
        input_rules.check_json(value, "answer")
    with transaction.atomic():
        row = (
            TurnSlot.objects.filter(
                session_id=session_id,
                turn_id=turn_pk,
                slot_id=slot_id,
                status=TurnSlot.Status.OPEN,
                waits_for_answer=True,
                turn__status__in=ANSWERABLE_STATUSES,
            )
            .only("pk", "renderer")
            .first()
        )
        if row is None or row.renderer == APPROVAL_RENDERER:
            # An approval is decided through `approvals.services.approval_decide` only.
            return False
        decided = (
            permission_decision(value)
            if row.renderer == PERMISSION_RENDERER and not dismiss
            else None
        )
        if dismiss:
            stored = DISMISSED_ANSWER
        elif decided is not None:  # approve / reject (with a reason), checked: DecisionRefused
            stored = {"value": decided}
        elif row.renderer == PERMISSION_RENDERER:
            answer = value.get("value") if isinstance(value, dict) else value
            key = answer.strip().lower() if isinstance(answer, str) else answer
            if not isinstance(key, str | bool) or key not in PERMISSION_ANSWERS:
                return False
            stored = {"value": PERMISSION_ANSWERS[key]}
        else:
            stored = {"value": value}
        # Conditional: of two answers racing (two tabs, two servers), one wins.
        answered = bool(
            TurnSlot.objects.filter(pk=row.pk, status=TurnSlot.Status.OPEN).update(
                status=TurnSlot.Status.ANSWERED,
                answer=stored,
                answered_by=by[:150],
                answered_via=via[:10],
            )
        )
        if answered:
            # A turn parked on this prompt goes back on the queue in this transaction.
            turn_waking.wake_turn(turn_pk)
        return answered


def expire_slots(turn: Turn) -> None:
    # Cards that wait for nothing stay on the page after the turn; prompts cannot be
    # answered any more (a retried turn asks again).
    expired = TurnSlot.objects.filter(
        turn=turn,
        waits_for_answer=True,
        status__in=[TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED],
    ).update(status=TurnSlot.Status.EXPIRED)
    if expired:
        turn_event(turn, "slot.resolved", {"turn": turn.pk, "expired": expired})
    # Nothing waits for its approvals any more: they can no longer be decided.
    approvals.approvals_withdraw(turn_id=turn.pk)
