"""What pages and the API read about turns and their prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gloveapp.conversations.models import Message
from gloveapp.core.display import PERMISSION_RENDERER, Slot
from gloveapp.core.display import visible_slots as strategy_filter
from gloveapp.lib.paging import Cursor
from gloveapp.turns.models import ENDED_WITH_NOTE, UNFINISHED, Turn, TurnSlot
from gloveapp.turns.slots import slot_address, slot_public_id


@dataclass(frozen=True, slots=True)
class SlotView:
    """A display slot as a page renders it: `template` is the tool's colocated slot template,
    or the permission / generic one. `expired`: its turn stopped before it was answered."""

    id: str
    renderer: str
    input: Any
    tool_name: str | None
    call_id: str | None
    display_strategy: str
    waits_for_answer: bool
    template: str
    created_at: str
    expired: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "renderer": self.renderer,
            "input": self.input,
            "tool_name": self.tool_name,
            "call_id": self.call_id,
            "display_strategy": self.display_strategy,
            "waits_for_answer": self.waits_for_answer,
            "template": self.template,
            "created_at": self.created_at,
            "expired": self.expired,
        }


def visible_slots(session_id: str) -> list[SlotView]:
    """The slots a page shows now, in push order, by each slot's display strategy; plus the
    prompts of the newest turn if that turn stopped before they were answered."""
    newest = Turn.objects.filter(session_id=session_id).order_by("-id").first()
    rows = list(TurnSlot.objects.filter(session_id=session_id, status=TurnSlot.Status.OPEN))
    if newest is not None and newest.status != Turn.Status.DONE:
        rows += TurnSlot.objects.filter(turn=newest, status=TurnSlot.Status.EXPIRED)
    rows.sort(key=lambda row: row.pk)
    slots = {
        row.pk: Slot(
            id=str(row.pk),
            renderer=row.renderer,
            input=row.input,
            display_strategy=row.display_strategy,  # type: ignore[arg-type]
            tool_name=row.tool_name,
            call_id=row.call_id,
            waits_for_answer=row.waits_for_answer,
            status="pending" if row.status == TurnSlot.Status.OPEN else "removed",
            sequence=row.pk,
        )
        for row in rows
    }
    by_pk = {row.pk: row for row in rows}
    shown = {int(slot.id) for slot in strategy_filter(slots.values())}
    return [
        SlotView(
            id=slot_public_id(row.turn_id, row.slot_id),
            renderer=row.renderer,
            input=row.input,
            tool_name=row.tool_name,
            call_id=row.call_id,
            display_strategy=row.display_strategy,
            waits_for_answer=row.waits_for_answer,
            template=row.template,
            created_at=row.created_at.isoformat(),
            expired=row.status == TurnSlot.Status.EXPIRED,
        )
        for pk, row in by_pk.items()
        if pk in shown or row.status == TurnSlot.Status.EXPIRED
    ]


def permission_prompts(session_id: str) -> list[SlotView]:
    """The session's permission prompts that wait for an answer, as its page shows them
    (its subagents' included: they run on its turns)."""
    return [
        slot
        for slot in visible_slots(session_id)
        if slot.renderer == PERMISSION_RENDERER and slot.waits_for_answer and not slot.expired
    ]


def is_permission_prompt(session_id: str, public_id: str) -> bool:
    """Whether `public_id` names a permission prompt of the session, answered or not."""
    address = slot_address(public_id)
    if address is None:
        return False
    turn_pk, slot_id = address
    return TurnSlot.objects.filter(
        session_id=session_id, turn_id=turn_pk, slot_id=slot_id, renderer=PERMISSION_RENDERER
    ).exists()


def slot_exists(session_id: str, public_id: str) -> bool:
    """Whether `public_id` names a slot of the session, answered or not (an outsider's
    guess and an unknown id read the same: no)."""
    address = slot_address(public_id)
    if address is None:
        return False
    turn_pk, slot_id = address
    return TurnSlot.objects.filter(session_id=session_id, turn_id=turn_pk, slot_id=slot_id).exists()


@dataclass(frozen=True)
class AnsweredSlot:
    """What an answer is checked against: the slot's renderer and the tool that pushed it."""

    renderer: str
    tool_name: str
    waits_for_answer: bool


def slot_to_answer(session_id: str, public_id: str) -> AnsweredSlot | None:
    """The session's slot `public_id` names (answered or not), None for an outsider's guess
    or an unknown id alike."""
    address = slot_address(public_id)
    if address is None:
        return None
    turn_pk, slot_id = address
    row = (
        TurnSlot.objects.filter(session_id=session_id, turn_id=turn_pk, slot_id=slot_id)
        .values_list("renderer", "tool_name", "waits_for_answer")
        .first()
    )
    if row is None:
        return None
    return AnsweredSlot(renderer=row[0] or "", tool_name=row[1] or "", waits_for_answer=row[2])


def is_busy(session_id: str) -> bool:
    """Whether a turn of the session is running, parked on a person or waiting to run, in
    any process."""
    return Turn.objects.filter(session_id=session_id, status__in=UNFINISHED).exists()


def is_running(session_id: str) -> bool:
    return Turn.objects.filter(session_id=session_id, status=Turn.Status.RUNNING).exists()


def queued(session_id: str) -> int:
    return Turn.objects.filter(session_id=session_id, status=Turn.Status.QUEUED).count()


def newest_turn(session_id: str) -> Turn | None:
    return Turn.objects.filter(session_id=session_id).order_by("-id").first()


def live_turns(session_id: str) -> list[Turn]:
    """The session's messages that run or wait, in the order they will run."""
    return list(
        Turn.objects.filter(session_id=session_id, status__in=UNFINISHED)
        .only("pk", "text", "status", "created_at", "session_id")
        .order_by("id")
    )


def ended_turn_notes(
    session_id: str, *, from_seq: int | None = None, to_seq: int | None = None
) -> list[Turn]:
    """Turns that were stopped or failed, with where their note goes (`end_seq`) and who
    stopped them: the transcripts say so after the turn's last message. `from_seq` and
    `to_seq` bound them to what one page of the history shows."""
    # The same condition as `turn_session_note_idx`'s: the read is of that small index.
    notes = Turn.objects.filter(
        session_id=session_id, status__in=ENDED_WITH_NOTE, end_seq__isnull=False
    )
    if from_seq is not None:
        notes = notes.filter(end_seq__gte=from_seq)
    if to_seq is not None:
        notes = notes.filter(end_seq__lte=to_seq)
    return list(notes.select_related("stopped_by").order_by("end_seq", "id"))


FINISHED = (Turn.Status.DONE, Turn.Status.FAILED, Turn.Status.CANCELLED)


def turns_page(
    session_id: str, *, limit: int, cursor: Cursor | None = None
) -> tuple[list[Turn], Cursor | None]:
    """One page of the session's turns, newest first, from `cursor` on; and the cursor of
    the next page, None on the last. Turns are numbered in the order they were queued, so
    the id alone is the key: one probe of the (session, id) index for any page."""
    turns = Turn.objects.filter(session_id=session_id).order_by("-id")
    if cursor is not None:
        turns = turns.filter(pk__lt=cursor.tie)
    rows = list(turns[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, Cursor(at=rows[-1].created_at, tie=rows[-1].pk)


def turn_reply(turn: Turn) -> str | None:
    """What the agent answered in a finished turn (its last message with text), None when it
    did not finish or said nothing. The turn's messages lie after its `base_seq`, before the
    next turn's."""
    if turn.status != Turn.Status.DONE:
        return None
    messages = Message.objects.filter(
        session_id=turn.session_id, seq__gt=turn.base_seq or 0, sender="agent"
    )
    following = (
        Turn.objects.filter(session_id=turn.session_id, pk__gt=turn.pk, base_seq__isnull=False)
        .order_by("id")
        .values_list("base_seq", flat=True)
        .first()
    )
    if following is not None:
        messages = messages.filter(seq__lte=following)
    return messages.exclude(text="").order_by("-seq").values_list("text", flat=True).first()


def open_prompts(turn: Turn) -> list[TurnSlot]:
    """The turn's slots that wait for an answer now, in push order."""
    return list(
        TurnSlot.objects.filter(
            turn=turn, status=TurnSlot.Status.OPEN, waits_for_answer=True
        ).order_by("pk")
    )


def turn_settled(turn: Turn) -> bool:
    """Whether a caller that waits on the turn can stop waiting: it ended, or it waits on
    someone (a slot open for an answer), so only an answer moves it on."""
    if turn.status in FINISHED:
        return True
    if turn.status == Turn.Status.QUEUED:
        return False
    return TurnSlot.objects.filter(
        turn=turn, status=TurnSlot.Status.OPEN, waits_for_answer=True
    ).exists()
