"""`/admin/usage/`: the usage charts' data, for staff who may view turns only."""

from __future__ import annotations

import io
import json
import re
from dataclasses import asdict

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def chart_data(html: str) -> dict:
    found = re.search(r'<script id="usage-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no chart data on the page"
    return json.loads(found[1])


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_days_turns_tokens_and_cost_are_in_the_charts(settings, turn_worker, async_client):
    settings.GLOVE_MODEL_PRICES = {"demo": {"input": 1000, "output": 1000}}
    root = await sync_to_async(get_user_model().objects.create_superuser)("root", password="pw-1")
    session = await sync_to_async(session_create)(owner=root, agent_name="coffee")
    await turns.submit_message(session_id=session.pk, text="show me the menu")
    await turns.wait_until_idle(session.pk)
    await sync_to_async(async_client.force_login)(root)
    # What the turn worker's scheduler does every few minutes; twice is once (idempotent).
    await sync_to_async(call_command)("usage_rollup", stdout=io.StringIO())
    await sync_to_async(call_command)("usage_rollup", stdout=io.StringIO())

    response = await async_client.get("/admin/usage/?days=7")
    data = chart_data(response.content.decode())

    assert response.status_code == 200 and len(data["days"]) == 7
    charts = data["charts"]
    [done] = [s for s in charts["turns"]["datasets"] if s["label"] == "done"]
    assert done["data"][-1] == 1  # today
    [tokens] = charts["tokens"]["datasets"]
    assert tokens["label"] == "coffee" and tokens["data"][-1] > 0
    [cost] = charts["cost"]["datasets"]
    assert cost["data"][-1] > 0
    assert charts["duration"]["datasets"][0]["data"][-1] is not None
    assert "vendor/chart-4.6.1.umd.min.js" in response.content.decode()


def test_only_staff_who_may_view_turns_read_it(client):
    user_model = get_user_model()
    customer = user_model.objects.create_user("cara", password="pw-1")
    clerk = user_model.objects.create_user("clerk", password="pw-1", is_staff=True)
    viewer = user_model.objects.create_user("vera", password="pw-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_turn"))

    client.force_login(customer)
    assert client.get("/admin/usage/").status_code == 302  # to the admin's login
    client.force_login(clerk)
    assert client.get("/admin/usage/").status_code == 403
    client.force_login(viewer)
    assert client.get("/admin/usage/?days=abc").status_code == 200
    assert "Usage charts" in client.get("/admin/turns/turn/").content.decode()  # the way there


@pytest.mark.parametrize("days", [7, 14, 30, 90])
def test_every_range_reads_the_days_summaries_never_the_steps(client, days):
    root = get_user_model().objects.create_superuser("root", password="pw-1")
    client.force_login(root)
    call_command("usage_rollup", stdout=io.StringIO())
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/admin/usage/?days={days}")
    assert response.status_code == 200
    assert len(chart_data(response.content.decode())["days"]) == days
    read = " ".join(q["sql"] for q in captured)
    assert "turns_usageday" in read
    assert "turns_turnstep" not in read
    assert "conversations_handoffrecord" not in read


def test_the_handoffs_of_each_day_are_summed_once_and_read_from_the_days(client):
    """A claim's wait counts on the day of the claim, from the request before it (a request
    of the day before too); a hand-back counts resolved when the agent's next turn answered;
    the window's p50 and p95 come from the days' buckets, within their bucket's bounds."""
    from datetime import timedelta

    from django.utils import timezone

    from gloveapp.conversations.models import HandoffRecord
    from gloveapp.turns.models import Turn

    root = get_user_model().objects.create_superuser("root", password="pw-1")
    client.force_login(root)
    now = timezone.localtime()
    today = now.replace(hour=12, minute=0, second=0, microsecond=0)
    yesterday = today - timedelta(days=1)

    def record(session, kind, at, from_state="agent"):
        made = HandoffRecord.objects.create(session=session, kind=kind, from_state=from_state)
        HandoffRecord.objects.filter(pk=made.pk).update(created_at=at)

    waits = [20, 40, 100, 400]  # seconds: one each in four buckets
    for n, wait in enumerate(waits):
        chat = session_create(owner=root, agent_name="coffee")
        asked = (yesterday if n == 0 else today) - timedelta(seconds=wait if n else 0)
        record(chat, HandoffRecord.Kind.REQUESTED, asked)
        # The first claim waited over midnight: asked yesterday, claimed today.
        record(
            chat,
            HandoffRecord.Kind.CLAIMED,
            today if n == 0 else asked + timedelta(seconds=wait),
            "queued",
        )
        record(chat, HandoffRecord.Kind.HANDED_BACK, today + timedelta(minutes=5), "person")
        if n % 2 == 0:  # half the chats: the agent's next turn answered
            turn = Turn.objects.create(session=chat, status=Turn.Status.DONE)
            Turn.objects.filter(pk=turn.pk).update(created_at=today + timedelta(minutes=6))
    # A second claim after the first is no new wait.
    record(chat, HandoffRecord.Kind.CLAIMED, today + timedelta(minutes=7), "queued")

    call_command("usage_rollup", stdout=io.StringIO())
    with CaptureQueriesContext(connection) as captured:
        page = client.get("/admin/usage/?days=7").content.decode()
    assert "conversations_handoffrecord" not in " ".join(q["sql"] for q in captured)

    assert "data-hand-backs>4<" in page
    assert "data-resolved-after-hand-back>2<" in page
    assert "(4 claimed from the queue)" in page
    charts = chart_data(page)["charts"]
    assert charts["hand_backs"]["datasets"][0]["data"][-1] == 4
    assert charts["hand_backs"]["datasets"][1]["data"][-1] == 2
    p50, p95 = charts["handoff_wait"]["datasets"]
    # The waits of 20, 40, 100 s and the one over midnight (about a day): p50 is in the
    # 30-45 s bucket or the next, p95 in the longest ones.
    assert 30 <= p50["data"][-1] <= 120
    assert p95["data"][-1] >= 14400
    assert p50["data"][-2] is None  # yesterday only asked
    # The agent's handoffs, with no turn of its summed: a rate of nothing is no rate.
    rates = {d["label"]: d["data"] for d in charts["handoff_rate"]["datasets"]}
    assert rates == {"coffee": [None] * 7}


def test_a_day_not_summed_yet_is_said_so(client):
    root = get_user_model().objects.create_superuser("root", password="pw-1")
    client.force_login(root)
    page = client.get("/admin/usage/?days=7").content.decode()
    assert "7 days of this window are not summed yet" in page


def test_a_new_databases_empty_days_are_written_at_once_as_summing_them_would(client):
    """The days before the window's first step and first handoff record hold nothing: one
    statement writes them, each the summary that summing it finds, and the days from
    the first record on are summed."""
    from datetime import timedelta

    from django.utils import timezone

    from gloveapp.conversations.models import HandoffRecord
    from gloveapp.turns.models import Turn, TurnStep, UsageDay
    from gloveapp.turns.usage_rollup import MAX_DAYS, day_summarise, usage_rollup

    root = get_user_model().objects.create_superuser("root", password="pw-1")
    chat = session_create(owner=root, agent_name="coffee")
    noon = timezone.localtime().replace(hour=12, minute=0, second=0, microsecond=0)
    record = HandoffRecord.objects.create(session=chat, kind=HandoffRecord.Kind.REQUESTED)
    HandoffRecord.objects.filter(pk=record.pk).update(created_at=noon - timedelta(days=20))
    turn = Turn.objects.create(session=chat, status=Turn.Status.DONE)
    TurnStep.objects.create(
        turn=turn, attempt=1, kind=TurnStep.Kind.ATTEMPT, outcome=Turn.Status.DONE,
        started_at=noon - timedelta(days=10), duration_ms=1500,
    )  # fmt: skip

    with CaptureQueriesContext(connection) as captured:
        written = usage_rollup()
    assert len(written) == MAX_DAYS
    assert len(captured) < 200  # 20 days summed, 70 written in one statement
    rows = {row.day: row for row in UsageDay.objects.all()}
    assert sorted(rows) == sorted(written)
    today = noon.date()
    assert rows[today - timedelta(days=10)].summary["turns"] == {"done": 1}
    assert rows[today - timedelta(days=20)].summary["handoffs"]["handoffs"] == {"coffee": 1}
    for day in (today - timedelta(days=21), today - timedelta(days=MAX_DAYS - 1)):
        summary, count = day_summarise(day)
        assert (rows[day].summary, rows[day].steps) == (asdict(summary), count)

    # Summed again, a day already written is left as it was, and the recent days are summed.
    assert usage_rollup() == [today, today - timedelta(days=1)]
