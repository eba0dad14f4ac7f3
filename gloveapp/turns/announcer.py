"""The announcer: mirrors a turn's display stack into TurnSlot rows as the turn runs (pushes
and closes), and hands a waiting tool the answer an earlier attempt's slot already has."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from gloveapp.core.display import DisplayManager, Slot, SlotRejectedError
from gloveapp.turns import slots
from gloveapp.turns.models import Turn
from gloveapp.turns.observe_turn import TurnObserver
from gloveapp.turns.single_turn import slot_template


def dismiss(display: DisplayManager, slot_id: str) -> None:
    """The customer dismissed the slot: its waiting tool's wait is rejected, as Glove's
    `reject(slotId)` (the tool throws; the executor runs it again, and it may ask again)."""
    display.reject(slot_id, SlotRejectedError(f'The customer dismissed "{slot_id}".'))


class SlotAnnouncer:
    """Mirrors a turn's display stack into TurnSlot rows (pushes and closes). A slot an
    earlier attempt stored is found again; if it was answered (or its request decided), the
    waiting tool gets that answer at once."""

    def __init__(
        self,
        turn: Turn,
        tools: dict[str, Any],
        display: DisplayManager | None = None,
        on_wait: Callable[[], None] | None = None,
        observer: TurnObserver | None = None,
    ) -> None:
        self.turn = turn
        self.tools = tools
        self.display = display
        self.on_wait = on_wait
        self.observer = observer
        self.announced: dict[str, Slot] = {}
        self.stored: set[str] = set()  # slots whose rows are written (or found again)
        self.pushed_any = False  # a row was written: the turn's end looks for prompts to expire
        self._in_order = asyncio.Lock()

    def settled(self, stack: list[Slot]) -> bool:
        """Every slot that waits for an answer has its row: the turn may park."""
        return all(slot.id in self.stored for slot in stack if slot.waits_for_answer)

    async def announce(self, stack: list[Slot]) -> None:
        # One change of the stack at a time, in order: a wait that closed is recorded (its
        # step kept) before the next prompt's push, which may park the turn (a parked
        # attempt records nothing more).
        async with self._in_order:
            await self._announce(stack)

    async def _announce(self, stack: list[Slot]) -> None:
        current = {slot.id: slot for slot in stack}
        pushed = [slot for slot_id, slot in current.items() if slot_id not in self.announced]
        gone = [slot for slot_id, slot in self.announced.items() if slot_id not in current]
        self.announced = current
        self.pushed_any = self.pushed_any or bool(pushed)
        for slot in gone:
            await sync_to_async(slots.slot_close)(
                turn=self.turn, slot_id=slot.id, status=slot.status
            )
            if self.observer is not None:
                await self.observer.wait_closed(slot)
        for slot in pushed:
            if self.observer is not None and slot.waits_for_answer:
                await self.observer.wait_opened(slot.id)
            outcome = await sync_to_async(slots.slot_push)(
                turn=self.turn, slot=slot, template=slot_template(self.tools, slot)
            )
            if outcome is None:
                continue
            self.stored.add(slot.id)
            if self.observer is not None and slot.waits_for_answer:
                row = outcome.row if isinstance(outcome, slots.Kept) else outcome
                self.observer.wait_stored(
                    slot.id, row.created_at, closed=row.status in slots.CLOSED_SLOT_STATUSES
                )
            if not slot.waits_for_answer or self.display is None:
                continue
            if isinstance(outcome, slots.Kept) and outcome.dismissed:
                dismiss(self.display, slot.id)
            elif isinstance(outcome, slots.Kept) and outcome.answered:
                self.display.resolve(slot.id, outcome.answer)
            elif self.on_wait is not None:
                self.on_wait()
