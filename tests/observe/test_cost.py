"""Cost: stored usage priced by GLOVE_MODEL_PRICES, per turn and session, in the admin and
the REST session detail; a model without a price is said to be unknown, never priced at 0."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.conversations.services import session_create, tokens_add
from gloveapp.core.types import TokenUsage
from gloveapp.observe.cost import Usage
from gloveapp.turns import claim, lifecycle, submit
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from gloveapp.turns.usage import session_usage_cost

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

PRICES = {"demo": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}


def api_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def finished_turn(session_id: str, user, *, model: str, usage: Usage) -> Turn:
    """A turn a worker ran and finished with this usage (through the services it uses: the
    store counts the tokens on the session, the worker stores them on the turn)."""
    tokens_add(
        session_id=session_id,
        usage=TokenUsage(
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            cache_read_input_tokens=usage.cache_read,
            cache_creation_input_tokens=usage.cache_write,
        ),
    )
    submit.turn_submit(session_id=session_id, text="hello", user_id=user.pk)
    turn = claim.turn_claim_next(session_id=session_id, worker_id="worker-a")
    lifecycle.turn_finish(
        turn_id=turn.pk, worker_id="worker-a", status="done", model=model, usage=usage
    )
    return Turn.objects.get(pk=turn.pk)


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_turns_usage_is_priced_in_the_rest_session_detail(settings, turn_worker):
    settings.GLOVE_MODEL_PRICES = PRICES
    carla = await sync_to_async(get_user_model().objects.create_user)("carla")
    session = await sync_to_async(session_create)(
        owner=carla, agent_name="coffee", session_id="brew"
    )
    await turns.submit_message(session_id=session.pk, text="show me the menu")
    await turns.wait_until_idle(session.pk)

    turn = await Turn.objects.aget(session_id=session.pk)
    body = (await sync_to_async(lambda: api_for(carla).get("/api/sessions/brew"))()).json()

    expected = (Decimal(turn.tokens_in) * 3 + Decimal(turn.tokens_out) * 15) / 1_000_000
    assert body["cost"]["usd"] == str(expected.quantize(Decimal("0.000001")))
    assert body["cost"]["complete"] is True and body["cost"]["unknownModels"] == []
    assert body["usage"]["tokensIn"] == turn.tokens_in
    assert body["usage"]["tokensOut"] == turn.tokens_out


def test_a_model_without_a_price_makes_the_cost_unknown_not_free(settings):
    settings.GLOVE_MODEL_PRICES = PRICES
    dora = get_user_model().objects.create_user("dora")
    session = session_create(owner=dora, agent_name="coffee", session_id="mixed")
    finished_turn(session.pk, dora, model="demo", usage=Usage(tokens_in=1_000_000))
    finished_turn(session.pk, dora, model="mystery-model", usage=Usage(tokens_in=10, tokens_out=5))

    cost = api_for(dora).get("/api/sessions/mixed").json()["cost"]

    assert cost["usd"] == "3.000000"  # the priced part only
    assert cost["complete"] is False
    assert cost["unknownModels"] == ["mystery-model"]

    settings.GLOVE_MODEL_PRICES = {}
    cost = api_for(dora).get("/api/sessions/mixed").json()["cost"]
    assert cost["usd"] is None and cost["complete"] is False
    assert set(cost["unknownModels"]) == {"demo", "mystery-model"}


def test_staff_read_the_cost_of_a_session_and_of_each_turn_in_the_admin(settings, client):
    settings.GLOVE_MODEL_PRICES = PRICES
    admin_user = get_user_model().objects.create_superuser("root", password="pw-root-1")
    session = session_create(owner=admin_user, agent_name="coffee", session_id="admin-cost")
    turn = finished_turn(
        session.pk, admin_user, model="demo", usage=Usage(tokens_in=2_000_000, cache_read=10**6)
    )
    finished_turn(session.pk, admin_user, model="gpt-unpriced", usage=Usage(tokens_out=7))
    client.force_login(admin_user)

    page = client.get(f"/admin/conversations/session/{quote(session.pk)}/change/").content.decode()
    assert "$6.300000 + unknown (no price for gpt-unpriced)" in page
    turn_page = client.get(f"/admin/turns/turn/{turn.pk}/change/").content.decode()
    assert "$6.300000" in turn_page
    listing = client.get("/admin/turns/turn/").content.decode()
    assert "unknown (no price for gpt-unpriced)" in listing


def test_an_invalid_price_table_is_a_system_check_error_naming_the_field(settings):
    settings.GLOVE_MODEL_PRICES = {"demo": {"input": "cheap", "output": 1}}
    with pytest.raises(SystemCheckError, match=r"glove.E021.*demo: input must be a number"):
        call_command("check")


def test_a_sessions_cost_outlives_its_pruned_turns_and_is_one_read(
    settings, django_assert_num_queries
):
    # Each turn's usage is added to the session's per-model row when the turn finishes: a
    # long chat's cost is not a sum over its turns, and pruning old turns keeps it known.
    settings.GLOVE_MODEL_PRICES = PRICES
    erin = get_user_model().objects.create_user("erin")
    session = session_create(owner=erin, agent_name="coffee", session_id="long-chat")
    for _ in range(3):
        finished_turn(session.pk, erin, model="demo", usage=Usage(tokens_in=1_000_000))
    finished_turn(session.pk, erin, model="demo", usage=Usage(tokens_out=1_000_000))
    old = timezone.now() - timedelta(days=400)
    Turn.objects.filter(session_id=session.pk).update(created_at=old, finished_at=old)

    assert lifecycle.turns_prune(older_than=timedelta(days=30)) == 4
    session.refresh_from_db()
    with django_assert_num_queries(1):
        found = session_usage_cost(session)

    assert found.as_dict()["usd"] == "24.000000"  # 3 x 3 $ in, 15 $ out
    assert found.as_dict()["complete"] is True
