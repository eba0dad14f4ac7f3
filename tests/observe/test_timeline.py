"""The turn timeline: a turn's steps stored as it runs (inside its fence), read as a
waterfall in the session's admin page and from `GET /api/sessions/<id>/timeline`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.conversations.services import session_create
from gloveapp.turns import claim, steps, submit
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn, TurnStep
from gloveapp.turns.retention import retention_apply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def api_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


async def run_turn(owner, key: str, text: str = "show me the menu"):
    session = await sync_to_async(session_create)(owner=owner, agent_name="coffee", session_id=key)
    await turns.submit_message(session_id=session.pk, text=text)
    await turns.wait_until_idle(session.pk)
    return session


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_turns_steps_are_stored_in_order_with_tokens_and_its_worker(turn_worker):
    carla = await sync_to_async(get_user_model().objects.create_user)("carla")
    session = await run_turn(carla, "menu")

    turn = await Turn.objects.aget(session_id=session.pk)
    steps = [step async for step in TurnStep.objects.filter(turn=turn).order_by("started_at", "id")]
    assert [(s.kind, s.name) for s in steps] == [
        ("attempt", "attempt 1"),
        ("model", "demo"),
        ("tool", "get_catalogue"),
        ("model", "demo"),
    ]
    assert {s.worker_id for s in steps} == {"test-worker"}
    attempt, first_call, tool, _ = steps
    assert attempt.outcome == "done" and attempt.duration_ms is not None
    assert tool.outcome == "success"
    assert first_call.detail["input_tokens"] + steps[3].detail["input_tokens"] == turn.tokens_in

    body = (await sync_to_async(lambda: api_for(carla).get("/api/sessions/menu/timeline"))()).json()
    [shown] = body["turns"]
    assert shown["turn"] == turn.pk and shown["status"] == "done"
    assert [s["kind"] for s in shown["steps"]][:2] in (["queued", "attempt"], ["attempt", "model"])
    assert all("workerId" not in s for s in shown["steps"])  # a customer sees no worker ids
    assert body["next"] is None


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_retried_turn_shows_each_attempt_with_the_worker_before_it(settings, turn_worker):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    dora = await sync_to_async(get_user_model().objects.create_user)("dora")
    session = await sync_to_async(session_create)(owner=dora, agent_name="coffee")
    # A worker claimed the turn, then died: its lease runs out.
    await sync_to_async(submit.turn_submit)(
        session_id=session.pk, text="show me the menu", user_id=dora.pk
    )
    # Its claim stored the attempt's step.
    dead = await sync_to_async(claim.turn_claim_next)(session_id=session.pk, worker_id="dead")

    await turns.wait_until_idle(session.pk)

    attempts = [
        step
        async for step in TurnStep.objects.filter(turn_id=dead.pk, kind="attempt").order_by(
            "attempt"
        )
    ]
    assert [(a.attempt, a.worker_id) for a in attempts] == [(1, "dead"), (2, "test-worker")]
    assert attempts[0].duration_ms is None  # its worker never came back to end it
    assert attempts[1].detail == {"previous_worker": "dead"} and attempts[1].outcome == "done"


def test_a_worker_that_lost_its_turn_stores_no_step():
    owner = get_user_model().objects.create_user("erin")
    session = session_create(owner=owner, agent_name="coffee")
    submit.turn_submit(session_id=session.pk, text="hello", user_id=owner.pk)
    mine = claim.turn_claim_next(session_id=session.pk, worker_id="worker-a")
    # Taken back and claimed again by another worker (worker-a stalled past its lease).
    Turn.objects.filter(pk=mine.pk).update(status="queued", lease_until=None)
    theirs = claim.turn_claim_next(session_id=session.pk, worker_id="worker-b")

    assert not steps.step_record(turn=mine, kind="model", name="demo", started_at=timezone.now())
    assert steps.step_record(turn=theirs, kind="model", name="demo", started_at=timezone.now())
    assert list(TurnStep.objects.filter(kind="model").values_list("worker_id", flat=True)) == [
        "worker-b"
    ]
    # Each claim stored its attempt's step (what a worker that dies mid-turn leaves).
    assert list(TurnStep.objects.filter(kind="attempt").values_list("attempt", "worker_id")) == [
        (1, "worker-a"),
        (2, "worker-b"),
    ]


def test_steps_older_than_the_retention_are_pruned_by_the_workers_retention(settings):
    settings.GLOVE_RETAIN_TURN_STEPS_DAYS = 7
    owner = get_user_model().objects.create_user("finn")
    session = session_create(owner=owner, agent_name="coffee")
    submit.turn_submit(session_id=session.pk, text="hello", user_id=owner.pk)
    turn = claim.turn_claim_next(session_id=session.pk, worker_id="worker-a")
    old = timezone.now() - timedelta(days=8)
    steps.step_record(turn=turn, kind="model", name="old", started_at=old)
    steps.step_record(turn=turn, kind="model", name="new", started_at=timezone.now())

    assert retention_apply()["turn timeline steps"] == 1
    assert list(TurnStep.objects.values_list("name", flat=True)) == ["attempt 1", "new"]


@pytest.mark.usefixtures("close_worker_connections")
async def test_staff_read_the_waterfall_on_the_sessions_admin_page(turn_worker, async_client):
    root = await sync_to_async(get_user_model().objects.create_superuser)("root", password="pw-1")
    session = await run_turn(root, "admin-timeline")
    await sync_to_async(async_client.force_login)(root)

    page = (
        await async_client.get(f"/admin/conversations/session/{quote(session.pk)}/change/")
    ).content.decode()

    assert "Turn timeline" in page
    assert page.count('class="timeline__step timeline__step--model"') == 2
    assert 'timeline__step--tool"' in page and "get_catalogue" in page
    assert "test-worker" in page  # staff see the worker of each step
    assert "<rect " in page


@pytest.mark.usefixtures("close_worker_connections")
async def test_staff_read_the_timeline_beside_the_chat_and_customers_do_not(
    turn_worker, async_client
):
    gus = await sync_to_async(get_user_model().objects.create_user)("gus", password="pw-1")
    staff = await sync_to_async(get_user_model().objects.create_superuser)("sam", password="pw-1")
    session = await run_turn(gus, "beside-chat")

    await sync_to_async(async_client.force_login)(gus)
    own_page = (await async_client.get("/sessions/beside-chat/")).content.decode()
    await sync_to_async(async_client.force_login)(staff)
    staff_page = (await async_client.get(f"/sessions/{session.pk}/")).content.decode()

    assert "Turn timeline" not in own_page
    assert "Turn timeline (staff)" in staff_page
    assert 'timeline__step--tool"' in staff_page


def test_staff_read_another_users_timeline_over_rest_and_outsiders_get_404():
    hal = get_user_model().objects.create_user("hal")
    ivy = get_user_model().objects.create_user("ivy", is_staff=True)
    jo = get_user_model().objects.create_user("jo")
    session = session_create(owner=hal, agent_name="coffee", session_id="hals-chat")
    submit.turn_submit(session_id=session.pk, text="hello", user_id=hal.pk)
    claim.turn_claim_next(session_id=session.pk, worker_id="worker-a")

    by_staff = api_for(ivy).get(f"/api/sessions/{session.pk}/timeline")
    by_owner = api_for(hal).get("/api/sessions/hals-chat/timeline")

    assert by_staff.status_code == 200, by_staff.content
    [turn] = by_staff.json()["turns"]
    assert [s["workerId"] for s in turn["steps"] if s["kind"] == "attempt"] == ["worker-a"]
    assert by_owner.status_code == 200
    assert "workerId" not in by_owner.json()["turns"][0]["steps"][-1]
    for path in (f"/api/sessions/{session.pk}/timeline", "/api/sessions/hals-chat/timeline"):
        assert api_for(jo).get(path).status_code == 404
