"""One attempt of a turn running on an engine: its display (which gives a slot pushed again
the id an earlier attempt stored), its abort, the attempt's task and the timer that parks it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gloveapp.core.abort import AbortController
from gloveapp.core.display import DisplayManager, Slot
from gloveapp.turns.announcer import SlotAnnouncer
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.slots import KeptSlot


class TurnDisplay(DisplayManager):
    """The display of one attempt of a turn. A continuing attempt re-runs the call that
    waited on a person: a slot it pushes again (same call, same renderer, in order) gets the
    id the earlier attempt stored, so it finds the same row, request and answer; other slots
    get ids no earlier attempt of the turn used."""

    def __init__(self, kept: list[KeptSlot] | None = None) -> None:
        super().__init__()
        kept = kept or []
        self._kept = [
            (slot.slot_id, slot.call_id, slot.renderer)
            for slot in kept
            if slot.status not in (TurnSlot.Status.EXPIRED, TurnSlot.Status.REJECTED)
        ]
        self._slot_count = max((_slot_number(slot.slot_id) for slot in kept), default=0)

    def _new_slot(self, renderer: str, input: Any, display_strategy: Any, *rest: Any) -> Slot:
        slot = super()._new_slot(renderer, input, display_strategy, *rest)
        for index, (slot_id, call_id, kept_renderer) in enumerate(self._kept):
            if call_id == slot.call_id and kept_renderer == renderer:
                del self._kept[index]
                slot.id = slot_id
                break
        return slot


def _slot_number(slot_id: str) -> int:
    number = slot_id.removeprefix("slot_")
    return int(number) if number.isascii() and number.isdigit() else 0


@dataclass(slots=True)
class RunningTurn:
    """A turn an engine runs now: what its watcher hands answers and stops to."""

    turn: Turn
    display: DisplayManager = field(default_factory=DisplayManager)
    abort: AbortController = field(default_factory=AbortController)
    # The attempt itself (cancelled when it parks), and the timer that parks it.
    task: asyncio.Future[Any] | None = None
    park_timer: asyncio.Task[Any] | None = None
    parked: bool = False
    announcer: SlotAnnouncer | None = None
    unsubscribe: Callable[[], None] | None = None


def waits(state: RunningTurn) -> bool:
    """Whether the running turn waits on a person now (a slot that waits for an answer)."""
    return not state.parked and any(slot.waits_for_answer for slot in state.display.stack)
