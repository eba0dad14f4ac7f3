"""Which requests are traced (`gloveapp.lib.telemetry.TraceGate`): every one while requests come
slowly, at most GLOVE_TRACED_REQUESTS_PER_SECOND a second when they come fast, always those a
caller's sampled `traceparent` asks for, never those it says to leave out, nor probes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from opentelemetry import context as otel_context
from opentelemetry import trace
from rest_framework.authtoken.models import Token

from gloveapp.observe import tracing
from gloveapp.turns.models import Turn
from tests.observe.otlp_receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
LEFT_OUT_TRACE = "5bf92f3577b34da6a3ce929d0e0e4737"
REQUESTS = """
import json, time
from django.test import Client
client, auth = Client(), {{"HTTP_AUTHORIZATION": "Token {token}"}}
started = time.monotonic()
for _ in range(40):
    assert client.get("/api/sessions", **auth).status_code == 200
took = time.monotonic() - started
for _ in range(3):
    client.get("/api/sessions", HTTP_TRACEPARENT="00-{caller}-{span}-01", **auth)
client.get("/api/sessions", HTTP_TRACEPARENT="00-{left_out}-{span}-00", **auth)
client.get("/healthz")
print(json.dumps({{"took": took}}))
"""

ANONYMOUS = """
from django.test import Client
client = Client()
for _ in range(20):
    client.get("/api/sessions", HTTP_TRACEPARENT="00-{caller}-{span}-01")
"""


TURNS = """
import json
from django.test import Client
client, auth = Client(), {{"HTTP_AUTHORIZATION": "Token {token}"}}
made = client.post("/api/sessions", {{"agentName": "coffee"}}, "application/json", **auth)
session = made.json()["sessionId"]
for text in ("hello", "menu", "thanks"):
    started = client.post(
        f"/api/sessions/{{session}}/agent/turns", {{"text": text}}, "application/json", **auth
    )
    assert started.status_code == 202, started.content
    assert client.get(f"/api/sessions/{{session}}", **auth).status_code == 200
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_keeps_a_seconds_worth_and_refills_at_its_rate(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(tracing.time, "monotonic", clock)
    budget = tracing.RequestBudget(2)
    assert [budget.take() for _ in range(3)] == [True, True, False]
    clock.now += 0.5  # one more a half second later
    assert [budget.take(), budget.take()] == [True, False]
    clock.now += 60  # an idle minute keeps no more than a second's worth
    assert [budget.take() for _ in range(3)] == [True, True, False]


def test_a_budget_below_one_a_second_still_lets_one_through_now_and_then(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(tracing.time, "monotonic", clock)
    budget = tracing.RequestBudget(0.5)
    assert [budget.take(), budget.take()] == [True, False]
    clock.now += 2
    assert budget.take()


def test_zero_traces_none_and_inf_every_one():
    assert not any(tracing.RequestBudget(0).take() for _ in range(5))
    assert all(tracing.RequestBudget(math.inf).take() for _ in range(5))


def test_what_runs_untraced_passes_no_trace_on(spans):
    token = otel_context.attach(tracing.untraced_context())
    try:
        assert tracing.current_traceparent() == ""  # a turn posted here starts its own
        with tracing.tracer().start_as_current_span("under it") as span:
            assert not span.is_recording()
    finally:
        otel_context.detach(token)
    assert spans.get_finished_spans() == ()


def sqlite_url() -> str:
    return f"sqlite:///{connection.settings_dict['NAME']}"


def serve(receiver: Receiver, script: str, per_second: str, **more: str) -> str:
    """`script` in a process set up as a server is, its spans sent to `receiver`."""
    env = {
        **os.environ,
        **more,
        "DATABASE_URL": sqlite_url(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "GLOVE_TRACED_REQUESTS_PER_SECOND": per_second,
    }
    run = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def received(receiver: Receiver, prefix: str, at_least: int) -> list[dict]:
    """The spans named `prefix...` once `at_least` came (the SDK exports at exit), and a
    moment more for any others."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(receiver.named(prefix)) < at_least:
        time.sleep(0.1)
    time.sleep(0.5)
    return receiver.named(prefix)


@pytest.fixture
def token(transactional_db) -> str:
    """An API token of a user of this test's SQLite file, which the server process opens."""
    if connection.vendor != "sqlite":
        pytest.skip("a server process on this test's SQLite file")
    ann = get_user_model().objects.create_user("ann")
    return Token.objects.create(user=ann).key


@pytest.mark.process
def test_a_server_traces_within_its_budget_and_as_callers_ask(token):
    with Receiver() as receiver:
        script = REQUESTS.format(
            token=token, caller=CALLER_TRACE, span=CALLER_SPAN, left_out=LEFT_OUT_TRACE
        )
        took = json.loads(serve(receiver, script, "2").strip().splitlines()[-1])["took"]
        received(receiver, "GET ", 4)

    requests = receiver.named("GET ")
    own = [span for span in requests if span["trace"] != CALLER_TRACE]
    # Two at once (a second's worth), then two a second while the forty ran.
    assert 1 <= len(own) <= 2 + math.ceil(2 * took) + 1, (len(own), took)
    assert len(own) < 40
    callers = [span for span in requests if span["trace"] == CALLER_TRACE]
    assert len(callers) == 3
    assert {span["parent"] for span in callers} == {CALLER_SPAN}
    assert not [span for span in receiver.spans if span["trace"] == LEFT_OUT_TRACE]
    assert not [span for span in requests if "healthz" in span["name"]]


@pytest.mark.process
def test_an_anonymous_callers_traceparent_is_not_obeyed(token):
    """Twenty anonymous requests with a sampled `traceparent` and a budget of none: no trace
    in the caller's trace id, and none past the budget."""
    with Receiver() as receiver:
        serve(receiver, ANONYMOUS.format(caller=CALLER_TRACE, span=CALLER_SPAN), "0")
        received(receiver, "GET ", 1)

    assert not receiver.named("GET ")
    assert not [span for span in receiver.spans if span["trace"] == CALLER_TRACE]


@pytest.mark.process
def test_a_trusted_proxys_traceparent_is_obeyed(token):
    with Receiver() as receiver:
        script = ANONYMOUS.format(caller=CALLER_TRACE, span=CALLER_SPAN)
        serve(receiver, script, "0", GLOVE_TRACE_TRUSTED_PROXIES="10.0.0.0/8,127.0.0.1")
        requests = received(receiver, "GET ", 20)

    assert len(requests) == 20
    assert {span["trace"] for span in requests} == {CALLER_TRACE}


@pytest.mark.process
def test_a_request_that_posts_a_turn_is_traced_whatever_the_budget(token):
    with Receiver() as receiver:
        serve(receiver, TURNS.format(token=token), "0")
        posted = received(receiver, "POST ", 3)

    assert (
        sorted(span["name"] for span in posted)
        == ["POST api/sessions/<str:session_id>/agent/turns"] * 3
    )
    assert not receiver.named("GET ")  # the budget is 0: the reads are not traced
    # Each turn keeps its request's trace, for the worker's spans to join.
    parents = list(Turn.objects.order_by("pk").values_list("trace_parent", flat=True))
    assert {parent.split("-")[1] for parent in parents} == {span["trace"] for span in posted}
    assert len(parents) == 3


def test_a_client_call_with_nothing_above_it_starts_no_trace():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=tracing.default_sampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    client = trace.SpanKind.CLIENT
    with tracer.start_as_current_span("SELECT", kind=client):  # a worker's poll
        pass
    with tracer.start_as_current_span("invoke_agent coffee"):
        with tracer.start_as_current_span("SELECT", kind=client):  # the turn's statement
            pass
    with tracer.start_as_current_span("GET api/sessions", kind=trace.SpanKind.SERVER):
        pass

    names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["SELECT", "invoke_agent coffee", "GET api/sessions"]
    [statement] = [span for span in exporter.get_finished_spans() if span.name == "SELECT"]
    assert statement.parent is not None
