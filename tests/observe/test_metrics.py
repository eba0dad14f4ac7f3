"""`GET /metrics`: private unless a token is set, and a turn shows in its counters.

A turn runs on a real turn worker in the test's loop (the offline demo model, whose menu
question calls a tool); the scrape is read back with the Prometheus client's own parser.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client
from prometheus_client.parser import text_string_to_metric_families

from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.observe import made_up_tools

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

TOKEN = "metrics-token-0123456789abcdef"


async def scrape():
    return await AsyncClient().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(scraped: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(
        v
        for (sample, sample_labels), v in scraped.items()
        if sample == name and set(labels.items()) <= set(sample_labels)
    )


def test_it_is_not_there_while_no_token_is_set(client: Client, settings):
    settings.GLOVE_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


def test_it_asks_for_the_token(client: Client, settings):
    settings.GLOVE_METRICS_TOKEN = TOKEN
    missing = client.get("/metrics")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert missing.status_code == wrong.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert "GLOVE_METRICS_TOKEN" in missing.content.decode()
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_turn_shows_in_the_counters_histograms_and_queue_gauges(settings, turn_worker):
    settings.GLOVE_METRICS_TOKEN = TOKEN
    settings.GLOVE_MODEL_PRICES = {"demo": {"input": 2, "output": 10}}
    owner = await sync_to_async(get_user_model().objects.create_user)("carla", password="pw-1")
    session = await sync_to_async(session_create)(owner=owner, agent_name="coffee")

    before = samples((await scrape()).content.decode())
    await turns.submit_message(session_id=session.pk, text="show me the menu")
    await turns.wait_until_idle(session.pk)
    response = await scrape()
    after = samples(response.content.decode())

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    agent = {"gen_ai_agent_name": "coffee"}
    assert grew("glove_turns_started_total", **agent) == 1
    assert grew("glove_turns_finished_total", status="done", **agent) == 1
    assert grew("glove_turn_duration_seconds_count", status="done", **agent) == 1
    assert grew("glove_turn_queue_wait_seconds_count", **agent) == 1
    # The demo model answered twice: the tool call, then the reply after its result.
    calls = grew("gen_ai_client_operation_duration_seconds_count", gen_ai_request_model="demo")
    assert calls == 2
    assert grew("glove_tool_calls_total", tool="get_catalogue", outcome="success", **agent) == 1

    turn = await Turn.objects.aget(session_id=session.pk)
    assert turn.model == "demo" and turn.tokens_in > 0 and turn.tokens_out > 0
    input_tokens = grew("glove_model_tokens_total", gen_ai_token_type="input", **agent)
    assert input_tokens == turn.tokens_in
    assert grew("gen_ai_client_token_usage_sum", gen_ai_token_type="output") == turn.tokens_out
    expected_cost = (turn.tokens_in * 2 + turn.tokens_out * 10) / 1_000_000
    assert grew("glove_model_cost_usd_total", **agent) == pytest.approx(expected_cost)
    # Nothing is left waiting: the gauges read from the database say so.
    assert value(after, "glove_turns_queued") == 0
    assert value(after, "glove_turns_running") == 0
    assert ("glove_turns_waiting", ()) in after
    assert ("glove_waiting_on_person", (("kind", "approval"),)) in after


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_model_without_a_price_is_counted_unpriced_never_free(settings, turn_worker):
    settings.GLOVE_METRICS_TOKEN = TOKEN
    settings.GLOVE_MODEL_PRICES = {}
    owner = await sync_to_async(get_user_model().objects.create_user)("dora", password="pw-1")
    session = await sync_to_async(session_create)(owner=owner, agent_name="coffee")

    before = samples((await scrape()).content.decode())
    await turns.submit_message(session_id=session.pk, text="hello")
    await turns.wait_until_idle(session.pk)
    after = samples((await scrape()).content.decode())

    unpriced = "glove_model_calls_unpriced_total"
    assert value(after, unpriced, gen_ai_request_model="demo") > value(
        before, unpriced, gen_ai_request_model="demo"
    )
    cost = "glove_model_cost_usd_total"
    assert value(after, cost, gen_ai_request_model="demo") == value(
        before, cost, gen_ai_request_model="demo"
    )


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_tool_the_model_made_up_is_counted_as_unknown(settings, turn_worker):
    """The `tool` label takes the agent's tools only: made-up names add no series."""
    made_up_tools.register()
    settings.GLOVE_METRICS_TOKEN = TOKEN
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "inventor": {
            "factory": "tests.observe.made_up_tools.inventor_agent",
            "model": "inventor-test",
        },
    }
    owner = await sync_to_async(get_user_model().objects.create_user)("ivo", password="pw-1")
    session = await sync_to_async(session_create)(owner=owner, agent_name="inventor")

    before = samples((await scrape()).content.decode())
    await turns.submit_message(session_id=session.pk, text="do something")
    await turns.wait_until_idle(session.pk)
    after = samples((await scrape()).content.decode())

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    agent = {"gen_ai_agent_name": "inventor"}
    assert grew("glove_tool_calls_total", tool="(unknown)", **agent) == 3
    assert grew("glove_tool_calls_total", tool="get_menu", outcome="success", **agent) == 1
    tools = {dict(labels).get("tool") for (_, labels) in after if dict(labels).get("tool")}
    assert not tools & set(made_up_tools.MADE_UP), tools


def test_http_requests_are_counted_and_timed_by_route_template_never_by_path(settings):
    settings.GLOVE_METRICS_TOKEN = TOKEN
    owner = get_user_model().objects.create_user("dora")
    client = Client()
    client.force_login(owner)
    route = "api/sessions/<str:session_id>/messages"

    def scraped() -> dict:
        text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
        return samples(text)

    before = scraped()
    for n in range(3):  # three sessions nobody has: three paths, one route, 404s
        client.get(f"/api/sessions/no-such-{n}/messages")
    client.generic("BREW", "/api/sessions")  # a method of the caller's making
    client.get("/no/such/page/%E2%82%AC")
    after = scraped()

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("glove_http_requests_total", route=route, method="GET", status_class="4xx") == 3
    assert grew("glove_http_request_duration_seconds_count", route=route, method="GET") == 3
    assert grew("glove_http_requests_total", route="api/sessions", method="OTHER") == 1
    assert grew("glove_http_requests_total", route="(unmatched)", status_class="4xx") == 1
    routes = {
        dict(labels).get("route") for (name, labels) in after if name.startswith("glove_http")
    }
    assert not any("no-such" in r or "€" in r or "no/such" in r for r in routes if r), routes
