"""The display stack: UI slots that tools push and the user (or a page) resolves.

A tool pushes a slot with a renderer name and an input. `push_and_forget` shows something and
returns the slot id at once; `push_and_wait` shows something and waits for the answer the page
sends back through `resolve` (or `reject`). Slot ids run `slot_1, slot_2, ...` per manager and
are never reused, not even after `clear_stack`.

One deliberate fix of Glove's display manager (contract §6.1, §10.9): in Glove, `removeSlot`
and `clearStack` leave a `pushAndWait` caller waiting forever. Here removing or clearing a slot
rejects its waiter with `SlotRemovedError`, and a waiter that is cancelled (an aborted tool)
takes its slot off the stack, since nobody could answer it any more.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from gloveapp.core.tools import DISPLAY_STRATEGIES, DisplayStrategy
from gloveapp.core.types import now_iso

SlotStatus = Literal["pending", "resolved", "rejected", "removed"]
SlotListener = Callable[[list["Slot"]], Awaitable[None] | None]

GENERIC_RENDERER = "generic"
PERMISSION_RENDERER = "permission_request"


class SlotRejectedError(Exception):
    """The page rejected a `push_and_wait` slot (the tool sees this as a thrown error)."""


class SlotRemovedError(SlotRejectedError):
    """A waited-on slot was removed or the stack was cleared before anyone answered it."""

    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id
        super().__init__(f'Display slot "{slot_id}" was removed before it was resolved.')


@dataclass(slots=True)
class Slot:
    """One entry of the display stack."""

    id: str
    renderer: str
    input: Any = None
    display_strategy: DisplayStrategy = "stay"
    tool_name: str | None = None
    call_id: str | None = None
    waits_for_answer: bool = False
    status: SlotStatus = "pending"
    created_at: str = field(default_factory=now_iso)
    # Push order; `created_at` has millisecond resolution, so `hide-on-new` uses this.
    sequence: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "renderer": self.renderer,
            "input": self.input,
            "displayStrategy": self.display_strategy,
            "toolName": self.tool_name,
            "toolCallId": self.call_id,
            "waitsForAnswer": self.waits_for_answer,
            "status": self.status,
            "createdAt": self.created_at,
        }


class DisplayManager:
    """The display stack of one conversation (glove-core's `Displaymanager`)."""

    def __init__(self) -> None:
        self._slot_count = 0
        self.stack: list[Slot] = []
        self._waiters: dict[str, asyncio.Future[Any]] = {}
        self._listeners: list[SlotListener] = []
        # Notifications scheduled from the synchronous resolve/reject/remove_slot; kept so the
        # tasks are not garbage-collected before they run.
        self._pending_notifications: set[asyncio.Task[None]] = set()

    # -- pushing ---------------------------------------------------------------------------
    async def push_and_forget(
        self,
        *,
        renderer: str,
        input: Any = None,
        display_strategy: DisplayStrategy = "stay",
        tool_name: str | None = None,
        call_id: str | None = None,
    ) -> str:
        """Show a slot and return its id; it stays until removed or the stack is cleared."""
        slot = self._new_slot(renderer, input, display_strategy, tool_name, call_id, False)
        self.stack.append(slot)
        await self._notify()
        return slot.id

    async def push_and_wait(
        self,
        *,
        renderer: str,
        input: Any = None,
        display_strategy: DisplayStrategy = "stay",
        tool_name: str | None = None,
        call_id: str | None = None,
    ) -> Any:
        """Show a slot and wait for the value passed to `resolve` (or the error of `reject`)."""
        slot = self._new_slot(renderer, input, display_strategy, tool_name, call_id, True)
        # Register the waiter before notifying, so a listener that answers at once is heard.
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[slot.id] = waiter
        self.stack.append(slot)
        await self._notify()
        try:
            return await waiter
        except asyncio.CancelledError:
            # The waiting tool was cancelled (aborted request): nobody can answer this slot.
            if self._waiters.pop(slot.id, None) is not None:
                self._drop(slot.id, "removed")
                self._schedule_notify()
            raise

    # -- answering ---------------------------------------------------------------------------
    def resolve(self, slot_id: str, value: Any = None) -> bool:
        """Answer a waiting slot. Unknown ids and forget-slots are a no-op (returns False)."""
        waiter = self._waiters.pop(slot_id, None)
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(value)
        self._drop(slot_id, "resolved")
        self._schedule_notify()
        return True

    def reject(self, slot_id: str, error: BaseException | str | None = None) -> bool:
        """Fail a waiting slot; the waiting tool raises `error` (a thrown error is retried)."""
        waiter = self._waiters.pop(slot_id, None)
        if waiter is None:
            return False
        if not isinstance(error, BaseException):
            error = SlotRejectedError(error or f'Display slot "{slot_id}" was rejected.')
        if not waiter.done():
            waiter.set_exception(error)
        self._drop(slot_id, "rejected")
        self._schedule_notify()
        return True

    def remove_slot(self, slot_id: str) -> None:
        """Take a slot off the stack; a tool waiting on it gets `SlotRemovedError`."""
        self._fail_waiter(slot_id)
        self._drop(slot_id, "removed")
        self._schedule_notify()

    async def clear_stack(self) -> None:
        """Empty the stack; every waiting tool gets `SlotRemovedError`."""
        for slot in self.stack:
            self._fail_waiter(slot.id)
            slot.status = "removed"
        self.stack = []
        await self._notify()

    # -- listening ---------------------------------------------------------------------------
    def subscribe(self, listener: SlotListener) -> Callable[[], None]:
        """Call `listener(stack)` after every change; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def get_slot(self, slot_id: str) -> Slot | None:
        return next((slot for slot in self.stack if slot.id == slot_id), None)

    def is_waiting(self, slot_id: str) -> bool:
        return slot_id in self._waiters

    # -- internals ---------------------------------------------------------------------------
    def _new_slot(
        self,
        renderer: str,
        input: Any,
        display_strategy: DisplayStrategy,
        tool_name: str | None,
        call_id: str | None,
        waits: bool,
    ) -> Slot:
        if display_strategy not in DISPLAY_STRATEGIES:
            raise ValueError(
                f"display_strategy must be one of {', '.join(DISPLAY_STRATEGIES)}, "
                f"got {display_strategy!r}"
            )
        self._slot_count += 1
        return Slot(
            id=f"slot_{self._slot_count}",
            renderer=renderer,
            input=input,
            display_strategy=display_strategy,
            tool_name=tool_name,
            call_id=call_id,
            waits_for_answer=waits,
            sequence=self._slot_count,
        )

    def _fail_waiter(self, slot_id: str) -> None:
        waiter = self._waiters.pop(slot_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(SlotRemovedError(slot_id))

    def _drop(self, slot_id: str, status: SlotStatus) -> None:
        kept = []
        for slot in self.stack:
            if slot.id == slot_id:
                slot.status = status
            else:
                kept.append(slot)
        self.stack = kept

    async def notified(self) -> None:
        """Return once every change so far has reached the listeners (`resolve` and its kind
        notify on a task of their own): a caller that persists what the listeners saw
        waits for them before it moves on."""
        # A finished task stays in the set until its done callback runs on a later loop
        # iteration; awaiting it again returns at once without yielding, so only the
        # unfinished ones are awaited (or this would spin, the loop blocked).
        while pending := [task for task in self._pending_notifications if not task.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _notify(self) -> None:
        snapshot = list(self.stack)
        for listener in list(self._listeners):
            outcome = listener(snapshot)
            if inspect.isawaitable(outcome):
                await outcome

    def _schedule_notify(self) -> None:
        # resolve/reject/remove_slot are synchronous (Glove does not await the notification
        # either); the listeners run on the next loop iteration.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._notify())
        self._pending_notifications.add(task)
        task.add_done_callback(self._pending_notifications.discard)


class BoundDisplay:
    """A tool's view of the display manager: pushes default to the tool's own renderer.

    Like glove-react's wrapped display, an explicit `renderer` still wins. Slots carry the
    tool name and call id, so a page can line them up with the tool call that made them.
    """

    def __init__(
        self,
        manager: DisplayManager,
        *,
        tool_name: str,
        call_id: str | None = None,
        display_strategy: DisplayStrategy = "stay",
    ) -> None:
        self.manager = manager
        self.tool_name = tool_name
        self.call_id = call_id
        self.display_strategy = display_strategy

    async def push_and_wait(
        self,
        *,
        renderer: str | None = None,
        input: Any = None,
        display_strategy: DisplayStrategy | None = None,
    ) -> Any:
        return await self.manager.push_and_wait(
            renderer=renderer or self.tool_name,
            input=input,
            display_strategy=display_strategy or self.display_strategy,
            tool_name=self.tool_name,
            call_id=self.call_id,
        )

    async def push_and_forget(
        self,
        *,
        renderer: str | None = None,
        input: Any = None,
        display_strategy: DisplayStrategy | None = None,
    ) -> str:
        return await self.manager.push_and_forget(
            renderer=renderer or self.tool_name,
            input=input,
            display_strategy=display_strategy or self.display_strategy,
            tool_name=self.tool_name,
            call_id=self.call_id,
        )

    def remove_slot(self, slot_id: str) -> None:
        self.manager.remove_slot(slot_id)


def visible_slots(slots: Iterable[Slot]) -> list[Slot]:
    """The slots a page should show, by each slot's display strategy.

    - `stay`: always.
    - `hide-on-complete`: only while pending (resolved, rejected or removed slots hide).
    - `hide-on-new`: only the newest slot of its tool (or renderer, for slots without a tool).
    """
    ordered = list(slots)
    newest_by_owner: dict[str, int] = {}
    for slot in ordered:
        if slot.display_strategy == "hide-on-new":
            owner = slot.tool_name or slot.renderer
            newest_by_owner[owner] = max(newest_by_owner.get(owner, 0), slot.sequence)
    shown = []
    for slot in ordered:
        if slot.display_strategy == "hide-on-complete" and slot.status != "pending":
            continue
        if slot.display_strategy == "hide-on-new":
            if slot.sequence != newest_by_owner[slot.tool_name or slot.renderer]:
                continue
        shown.append(slot)
    return shown
