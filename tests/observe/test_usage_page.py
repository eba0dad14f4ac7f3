"""`/admin/usage/`: the usage charts' data, for staff who may view turns only."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

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
