"""The display stack: slots pushed by tools, answered by the page."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gloveapp.core import (
    BoundDisplay,
    DisplayManager,
    SlotRejectedError,
    SlotRemovedError,
    visible_slots,
)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_it_numbers_slots_from_slot_1_and_never_reuses_ids():
    display = DisplayManager()
    assert await display.push_and_forget(renderer="card", input={"a": 1}) == "slot_1"
    assert await display.push_and_forget(renderer="card") == "slot_2"
    await display.clear_stack()
    assert await display.push_and_forget(renderer="card") == "slot_3"


async def test_it_returns_the_resolved_value_to_the_waiting_caller_and_drops_the_slot():
    display = DisplayManager()
    waiting = asyncio.create_task(display.push_and_wait(renderer="form", input={"q": "size?"}))
    await settle()
    [slot] = display.stack
    assert (slot.id, slot.renderer, slot.input) == ("slot_1", "form", {"q": "size?"})
    assert display.resolve("slot_1", {"size": "L"}) is True
    assert await waiting == {"size": "L"}
    assert display.stack == []
    assert slot.status == "resolved"


async def test_it_raises_the_rejection_in_the_waiting_caller():
    display = DisplayManager()
    waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    display.reject("slot_1", "user closed the form")
    with pytest.raises(SlotRejectedError, match="user closed the form"):
        await waiting
    assert display.stack == []


async def test_it_ignores_resolving_an_unknown_slot_or_a_forget_slot():
    display = DisplayManager()
    slot_id = await display.push_and_forget(renderer="note")
    assert display.resolve(slot_id, "x") is False
    assert display.resolve("slot_99", "x") is False
    assert [slot.id for slot in display.stack] == [slot_id]


async def test_it_rejects_the_waiter_when_its_slot_is_removed():
    display = DisplayManager()
    waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    display.remove_slot("slot_1")
    with pytest.raises(SlotRemovedError, match='Display slot "slot_1" was removed before it was'):
        await waiting
    assert display.stack == []


async def test_it_rejects_every_waiter_when_the_stack_is_cleared():
    display = DisplayManager()
    first = asyncio.create_task(display.push_and_wait(renderer="form"))
    second = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    await display.clear_stack()
    for waiting in (first, second):
        with pytest.raises(SlotRemovedError):
            await waiting


async def test_it_takes_the_slot_away_when_the_waiting_tool_is_cancelled():
    display = DisplayManager()
    waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert display.stack == []
    assert display.is_waiting("slot_1") is False


async def test_it_tells_subscribers_about_every_change_until_they_unsubscribe():
    display = DisplayManager()
    seen: list[list[str]] = []

    async def listener(stack):
        seen.append([slot.id for slot in stack])

    unsubscribe = display.subscribe(listener)
    waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    display.resolve("slot_1", True)
    await waiting
    await settle()
    unsubscribe()
    await display.push_and_forget(renderer="note")
    assert seen == [["slot_1"], []]


async def test_it_lets_a_caller_wait_until_an_answer_has_reached_the_listeners():
    display = DisplayManager()
    seen: list[list[str]] = []

    async def slow_listener(stack):
        for _ in range(5):  # a listener that writes somewhere, several awaits long
            await asyncio.sleep(0)
        seen.append([slot.id for slot in stack])

    display.subscribe(slow_listener)
    waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
    await settle()
    display.resolve("slot_1", True)
    await waiting

    await display.notified()

    assert seen == [["slot_1"], []]


def test_it_returns_from_notified_when_the_last_notification_has_just_finished():
    """A caller woken by a listener runs before that notification's task is cleaned up (its
    done callbacks come next on the loop): `notified` must see the task is done and return,
    not await it again forever without yielding (which froze a turn's end, the loop blocked).
    The loop runs in a thread of its own, so a spin fails the test instead of hanging it."""
    outcome: list[bool] = []

    async def scenario() -> None:
        display = DisplayManager()
        heard = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(display.push_and_wait(renderer="form"))
        await settle()
        display.subscribe(lambda stack: heard.done() or heard.set_result(None))
        display.resolve("slot_1", True)
        await heard  # woken inside the notification's task, before its clean-up runs
        await display.notified()
        outcome.append(await waiting)

    thread = threading.Thread(target=asyncio.run, args=(scenario(),), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "notified() spun: the event loop never got control back"
    assert outcome == [True]


async def test_it_hears_a_listener_that_answers_during_the_push():
    display = DisplayManager()
    display.subscribe(lambda stack: display.resolve(stack[-1].id, "instant") and None)
    assert await display.push_and_wait(renderer="form") == "instant"


async def test_it_defaults_a_tools_pushes_to_its_own_renderer_and_strategy():
    display = DisplayManager()
    bound = BoundDisplay(
        display, tool_name="checkout", call_id="call_1", display_strategy="hide-on-new"
    )
    await bound.push_and_forget(input={"total": 3})
    await bound.push_and_forget(renderer="receipt", input={})
    first, second = display.stack
    assert (first.renderer, first.tool_name, first.call_id) == ("checkout", "checkout", "call_1")
    assert first.display_strategy == "hide-on-new"
    assert second.renderer == "receipt"


async def test_it_refuses_an_unknown_display_strategy():
    with pytest.raises(ValueError, match="display_strategy must be one of"):
        await DisplayManager().push_and_forget(renderer="x", display_strategy="fade")


async def test_it_shows_slots_according_to_their_display_strategy():
    display = DisplayManager()
    await display.push_and_forget(renderer="a", tool_name="search", display_strategy="hide-on-new")
    await display.push_and_forget(renderer="a", tool_name="search", display_strategy="hide-on-new")
    await display.push_and_forget(renderer="b", display_strategy="stay")
    waiting = asyncio.create_task(
        display.push_and_wait(renderer="c", display_strategy="hide-on-complete")
    )
    await settle()
    history = list(display.stack)
    assert [s.id for s in visible_slots(history)] == ["slot_2", "slot_3", "slot_4"]
    display.resolve("slot_4", None)
    await waiting
    assert [s.id for s in visible_slots(history)] == ["slot_2", "slot_3"]
