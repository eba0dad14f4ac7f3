"""The turn queue in the database: one running turn per session, restarts, cancel, limits.

A turn worker runs in the test's event loop (the `turn_worker` fixture); "another worker"
is played by claiming a turn under a different worker id, as a second process would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient
from django.utils import timezone

from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import session_create
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns import claim, leases, lifecycle, slots, submit
from gloveapp.turns import public as turns
from gloveapp.turns.fence import turn_fence
from gloveapp.turns.models import Turn, TurnSlot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("carla", password="pw-carla-1")


@pytest.fixture
def session_id(customer) -> str:
    return session_create(owner=customer, agent_name="coffee", title="Brew").pk


def test_it_lets_only_one_turn_of_a_session_run_whoever_claims_it(session_id, customer):
    for text in ("first", "second"):
        submit.turn_submit(session_id=session_id, text=text, user_id=customer.pk)

    mine = claim.turn_claim_next(session_id=session_id, worker_id="worker-a")
    theirs = claim.turn_claim_next(session_id=session_id, worker_id="worker-b")

    assert mine is not None and mine.text == "first"
    assert theirs is None
    lifecycle.turn_finish(turn_id=mine.pk, worker_id="worker-a", status=Turn.Status.DONE)
    after = claim.turn_claim_next(session_id=session_id, worker_id="worker-b")
    assert after is not None and after.text == "second"


def test_it_refuses_a_second_running_turn_in_the_database_itself(session_id, customer):
    from django.db import IntegrityError, transaction

    first = submit.turn_submit(session_id=session_id, text="a", user_id=customer.pk).turn
    second = submit.turn_submit(session_id=session_id, text="b", user_id=customer.pk).turn
    Turn.objects.filter(pk=first.pk).update(status=Turn.Status.RUNNING)

    with pytest.raises(IntegrityError), transaction.atomic():
        Turn.objects.filter(pk=second.pk).update(status=Turn.Status.RUNNING)


async def test_it_restarts_the_turn_of_a_dead_worker_without_storing_its_message_twice(
    session_id, customer, settings, turn_worker
):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    # A worker claimed the turn, stored the request, then died: its lease runs out.
    queued = await sync_to_async(submit.turn_submit)(
        session_id=session_id, text="show me the menu", user_id=customer.pk
    )
    turn = queued.turn
    await sync_to_async(claim.turn_claim_next)(session_id=session_id, worker_id="dead")
    await DjangoStore(session_id).append_messages(
        [CoreMessage(sender="user", text="show me the menu")]
    )

    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.aget(pk=turn.pk)
    assert turn.status == Turn.Status.DONE
    assert turn.attempts == 2 and turn.worker_id == "test-worker"
    texts = [
        text
        async for text in Message.objects.filter(session_id=session_id, sender="user")
        .exclude(text="tool results")
        .values_list("text", flat=True)
    ]
    assert texts == ["show me the menu"]
    assert await Message.objects.filter(session_id=session_id, sender="agent").aexists()
    assert await LiveEvent.objects.filter(
        stream=session_stream(session_id), type="turn.restarted"
    ).aexists()


async def test_it_finishes_a_restarted_turn_with_the_reply_its_dead_worker_stored(
    session_id, customer, settings, turn_worker
):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    # A worker stored the request and the reply, then died before it could end the turn
    # (killed, or cut off from the database): the retry must not answer again.
    queued = await sync_to_async(submit.turn_submit)(
        session_id=session_id, text="hello", user_id=customer.pk
    )
    turn = queued.turn
    await sync_to_async(claim.turn_claim_next)(session_id=session_id, worker_id="dead")
    await DjangoStore(session_id).append_messages(
        [CoreMessage(sender="user", text="hello"), CoreMessage(sender="agent", text="Hi there.")]
    )

    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.aget(pk=turn.pk)
    assert turn.status == Turn.Status.DONE and turn.attempts == 2
    replies = [
        text
        async for text in Message.objects.filter(session_id=session_id, sender="agent")
        .order_by("seq")
        .values_list("text", flat=True)
    ]
    assert replies == ["Hi there."]
    finished = await LiveEvent.objects.filter(
        stream=session_stream(session_id), type="turn.finished"
    ).aget()
    assert finished.payload["text"] == "Hi there."


def test_it_puts_a_turn_that_lost_the_database_back_on_the_queue(session_id, customer):
    submit.turn_submit(session_id=session_id, text="hello", user_id=customer.pk)
    turn = claim.turn_claim_next(session_id=session_id, worker_id="worker-a")

    assert not claim.turn_release(turn=turn, worker_id="worker-b")  # not theirs
    assert claim.turn_release(turn=turn, worker_id="worker-a")

    again = claim.turn_claim_next(session_id=session_id, worker_id="worker-b")
    assert again is not None and again.pk == turn.pk and again.attempts == 2


def test_a_plain_workers_task_fails_when_its_turns_could_not_run(session_id, customer, monkeypatch):
    from gloveapp.turns.queue.tasks import run_session_blocking

    turn = submit.turn_submit(session_id=session_id, text="hello", user_id=customer.pk).turn

    def broken_claim(**kwargs):
        raise ValueError("a bug in the claim")

    monkeypatch.setattr(claim, "turn_claim_next", broken_claim)
    # `db_worker` / `rqworker` run the task so: the backend must record a failure, not
    # a success for work not done.
    with pytest.raises(RuntimeError, match="could not run"):
        run_session_blocking(session_id)
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.QUEUED


async def test_it_fails_a_turn_after_its_last_attempt(session_id, customer, settings, turn_worker):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    settings.GLOVE_TURN_MAX_ATTEMPTS = 1
    queued = await sync_to_async(submit.turn_submit)(
        session_id=session_id, text="hello", user_id=customer.pk
    )
    turn = queued.turn
    await sync_to_async(claim.turn_claim_next)(session_id=session_id, worker_id="dead")

    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.aget(pk=turn.pk)
    assert turn.status == Turn.Status.FAILED
    assert "stopped" in turn.error


async def test_it_stops_a_running_turn_through_the_api_and_expires_its_prompt(
    session_id, customer, turn_worker
):
    from rest_framework.authtoken.models import Token

    token = await Token.objects.acreate(user=customer)
    await turns.submit_message(session_id=session_id, text="add Kenya AA")
    await turns.wait_until_idle(session_id)
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    while not await sync_to_async(turns.visible_slots)(session_id):
        import asyncio

        await asyncio.sleep(0.01)

    response = await AsyncClient().post(
        f"/api/sessions/{session_id}/cancel", headers={"Authorization": f"Token {token.key}"}
    )
    await turns.wait_until_idle(session_id)

    assert response.status_code == 200
    assert response.json() == {"cancelled": True}
    newest = await Turn.objects.filter(session_id=session_id).alast()
    assert newest.status == Turn.Status.CANCELLED
    slot = await TurnSlot.objects.filter(turn=newest).aget()
    assert slot.status == TurnSlot.Status.EXPIRED


async def test_it_hides_the_stop_route_from_outsiders(session_id, turn_worker):
    from rest_framework.authtoken.models import Token

    outsider = await sync_to_async(get_user_model().objects.create_user)("oscar")
    token = await Token.objects.acreate(user=outsider)

    response = await AsyncClient().post(
        f"/api/sessions/{session_id}/cancel", headers={"Authorization": f"Token {token.key}"}
    )

    assert response.status_code == 404


async def test_it_answers_429_on_the_page_past_the_users_turns_per_minute(
    session_id, customer, settings, turn_worker
):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 2
    client = AsyncClient()
    await client.aforce_login(customer)
    url = f"/sessions/{session_id}/messages"

    statuses = [(await client.post(url, {"text": f"hi {n}"})).status_code for n in range(3)]
    htmx = await client.post(url, {"text": "again"}, headers={"HX-Request": "true"})

    assert statuses == [303, 303, 429]
    assert htmx.status_code == 429
    assert "turns in the last minute" in htmx.content.decode()
    await turns.wait_until_idle(session_id)


def test_it_counts_only_this_minutes_turns(session_id, customer, settings):
    from unittest import mock

    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 1
    submit.turn_submit(session_id=session_id, text="old", user_id=customer.pk)
    with pytest.raises(submit.TurnLimitReached) as refused:
        submit.turn_submit(session_id=session_id, text="too soon", user_id=customer.pk)
    later = timezone.now() + timedelta(minutes=1)

    with mock.patch("django.utils.timezone.now", return_value=later):
        assert submit.turn_submit(session_id=session_id, text="new", user_id=customer.pk)
    assert refused.value.budget == "turns-per-minute" and 0 < refused.value.retry_after <= 61


def test_a_prompt_of_a_turn_whose_worker_died_stays_open_for_its_retry(
    session_id, customer, client
):
    """A crash is not a stop: the prompt keeps its id and can be answered while the turn
    waits for another worker, and the retry finds the same row (and its answer)."""
    from gloveapp.core.display import Slot

    turn = submit.turn_submit(session_id=session_id, text="checkout", user_id=customer.pk)
    turn = claim.turn_claim_next(session_id=session_id, worker_id="dead")
    prompt = Slot(id="slot_1", renderer="checkout", waits_for_answer=True, tool_name="checkout")
    slots.slot_push(turn=turn, slot=prompt, template="tools/generic_slot.html")
    Turn.objects.filter(pk=turn.pk).update(lease_until=timezone.now() - timedelta(seconds=1))

    leases.turns_take_back()
    client.force_login(customer)
    html = client.get(f"/sessions/{session_id}/").content.decode()
    answered = slots.slot_answer(
        session_id=session_id, public_id=f"t{turn.pk}-slot_1", value="confirm"
    )
    retry = claim.turn_claim_next(session_id=session_id, worker_id="alive")
    found = slots.slot_push(turn=retry, slot=prompt, template="tools/generic_slot.html")

    assert "This prompt expired" not in html
    assert f"t{turn.pk}-slot_1" in html
    assert answered
    assert retry.pk == turn.pk
    assert slots.turn_slots_kept(retry) == [
        ("slot_1", None, "checkout", TurnSlot.Status.ANSWERED, True)
    ]
    assert isinstance(found, slots.Kept) and found.answered and found.answer == "confirm"
    assert TurnSlot.objects.filter(turn_id=turn.pk).count() == 1


def _die(session_id: str, turn_id: int) -> Turn:
    """The turn's worker died: its lease runs out, the sweep takes it back."""
    Turn.objects.filter(pk=turn_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    leases.turns_take_back()
    return Turn.objects.get(pk=turn_id)


def test_a_turn_waiting_on_a_person_survives_any_number_of_worker_deaths(
    session_id, customer, settings
):
    """A death at a wait on a person spends no attempt (GLOVE_TURN_MAX_ATTEMPTS): the wait
    is the database's. A death elsewhere does, and the limit still ends a turn that kills
    its workers."""
    from gloveapp.core.display import Slot

    settings.GLOVE_TURN_MAX_ATTEMPTS = 2
    turn = submit.turn_submit(session_id=session_id, text="checkout", user_id=customer.pk).turn
    prompt = Slot(id="slot_1", renderer="checkout", waits_for_answer=True, tool_name="checkout")
    for attempt in range(1, 6):
        claimed = claim.turn_claim_next(session_id=session_id, worker_id=f"w{attempt}")
        slots.slot_push(turn=claimed, slot=prompt, template="tools/generic_slot.html")
        after = _die(session_id, turn.pk)
        assert after.status == Turn.Status.QUEUED, (attempt, after.error)

    slots.slot_answer(session_id=session_id, public_id=f"t{turn.pk}-slot_1", value="confirm")
    claim.turn_claim_next(session_id=session_id, worker_id="w6")
    # The answer taken: the turn waits on nobody now.
    TurnSlot.objects.filter(turn_id=turn.pk).update(status=TurnSlot.Status.RESOLVED)
    assert _die(session_id, turn.pk).status == Turn.Status.QUEUED  # the 1st of 2 real deaths
    claim.turn_claim_next(session_id=session_id, worker_id="w7")
    failed = _die(session_id, turn.pk)

    assert failed.status == Turn.Status.FAILED
    assert failed.attempts == 7


def test_a_turn_taken_back_from_its_worker_stores_nothing_more(session_id, customer):
    """A worker that stalled past its lease may still try to store its reply, its tool
    results or a prompt: the writes are fenced by the turn being its attempt's, so they
    store nothing (`FencedOff`), even when the same worker claimed the retry."""
    from gloveapp.conversations.services import FencedOff, messages_append, turn_record
    from gloveapp.core.display import Slot
    from gloveapp.core.types import TokenUsage

    submit.turn_submit(session_id=session_id, text="hello", user_id=customer.pk)
    stalled = claim.turn_claim_next(session_id=session_id, worker_id="worker-a")
    fence = turn_fence(stalled)
    messages_append(session_id=session_id, messages=[CoreMessage("user", "hello")], fence=fence)
    leases.turns_take_back(now=timezone.now() + timedelta(hours=1))
    retry = claim.turn_claim_next(session_id=session_id, worker_id="worker-a")
    late = [CoreMessage(sender="agent", text="late reply")]
    usage = TokenUsage(tokens_in=5, tokens_out=5)

    with pytest.raises(FencedOff):
        messages_append(session_id=session_id, messages=late, fence=fence)
    with pytest.raises(FencedOff):
        turn_record(session_id=session_id, messages=late, usage=usage, fence=fence)
    prompt = Slot(id="slot_1", renderer="checkout", waits_for_answer=True, tool_name="checkout")
    assert slots.slot_push(turn=stalled, slot=prompt, template="tools/generic_slot.html") is None
    turn_record(
        session_id=session_id,
        messages=[CoreMessage(sender="agent", text="the reply")],
        usage=usage,
        fence=turn_fence(retry),
    )

    texts = list(Message.objects.filter(session_id=session_id).values_list("text", flat=True))
    assert retry.pk == stalled.pk and retry.attempts == 2
    assert texts == ["hello", "the reply"]
    assert not TurnSlot.objects.filter(turn_id=stalled.pk).exists()
    assert Session.objects.get(pk=session_id).turn_count == 1


def test_it_lists_running_queued_failed_and_retried_turns_in_the_admin(
    session_id, customer, client
):
    staff = get_user_model().objects.create_user("stella", is_staff=True, is_superuser=True)
    running = submit.turn_submit(session_id=session_id, text="now", user_id=customer.pk).turn
    submit.turn_submit(session_id=session_id, text="next", user_id=customer.pk)
    claim.turn_claim_next(session_id=session_id, worker_id="w1")
    Turn.objects.filter(pk=running.pk).update(attempts=2)
    client.force_login(staff)

    listing = client.get("/admin/turns/turn/").content.decode()
    retried = client.get("/admin/turns/turn/?retried=yes").content.decode()
    queued = client.get("/admin/turns/turn/?status__exact=queued").content.decode()

    assert "running" in listing and "queued" in listing
    assert f"turn {running.pk} of" in retried or f"/admin/turns/turn/{running.pk}/" in retried
    assert f"/admin/turns/turn/{running.pk}/" not in queued


async def test_it_stops_a_running_turn_from_the_pages_stop_button(
    session_id, customer, turn_worker
):
    import asyncio

    client = AsyncClient()
    await client.aforce_login(customer)
    await turns.submit_message(session_id=session_id, text="add Kenya AA")
    await turns.wait_until_idle(session_id)
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    while not await sync_to_async(turns.visible_slots)(session_id):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    page = (await client.get(f"/sessions/{session_id}/")).content.decode()

    response = await client.post(f"/sessions/{session_id}/cancel")
    await turns.wait_until_idle(session_id)

    assert 'data-action="stop"' in page
    assert response.status_code == 303
    newest = await Turn.objects.filter(session_id=session_id).alast()
    assert newest.status == Turn.Status.CANCELLED
