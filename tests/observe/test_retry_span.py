"""A turn taken back from a dead worker is traced as a retry: `glove.retry` under the new
attempt's `invoke_agent`, naming the worker before it (the SDK's in-memory exporter)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gloveapp.conversations.services import session_create
from gloveapp.observe import tracing
from gloveapp.turns import public as turns
from gloveapp.turns import services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def spans(monkeypatch):
    """This process traced into memory (the global provider can be set once per process:
    later tests of the run find it set and add to it)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_configured", True)
    yield exporter
    exporter.shutdown()


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_retried_turn_is_traced_as_a_retry_after_the_dead_worker(
    settings, spans, turn_worker
):
    settings.GLOVE_TURN_LEASE_SECONDS = 0.5
    hana = await sync_to_async(get_user_model().objects.create_user)("hana")
    session = await sync_to_async(session_create)(owner=hana, agent_name="coffee")
    await sync_to_async(services.turn_submit)(
        session_id=session.pk, text="show me the menu", user_id=hana.pk
    )
    # A worker claims the turn (its claim stores the attempt's step), then dies.
    await sync_to_async(services.turn_claim_next)(session_id=session.pk, worker_id="dead")

    await turns.wait_until_idle(session.pk)

    finished = spans.get_finished_spans()
    [agent] = [span for span in finished if span.name == "invoke_agent coffee"]
    [retry] = [span for span in finished if span.name == "glove.retry"]
    assert agent.attributes["glove.turn.attempt"] == 2
    assert agent.attributes["glove.turn.status"] == "done"
    assert retry.parent.span_id == agent.context.span_id
    assert retry.attributes["glove.retry.previous_worker"] == "dead"
    chats = [span for span in finished if span.name == "chat demo"]
    assert len(chats) == 2 and all(c.parent.span_id == agent.context.span_id for c in chats)
