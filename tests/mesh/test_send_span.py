"""A mesh send inside a traced turn is a `glove.mesh.send` span (the SDK's in-memory
exporter; outside any trace it costs nothing and records nothing)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.core.support import calls
from tests.mesh.support import A, B


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


async def test_a_send_in_a_traced_turn_is_a_span_naming_sender_and_recipient(mesh, spans):
    send = calls(("glove_mesh_send_message", {"to": "b", "content": "hello B"}))
    a, _, _ = mesh.agent("a", [send, "Sent."])
    b, _, _ = mesh.agent("b")
    await mesh.mount(a, A)
    await mesh.mount(b, B)

    with trace.get_tracer("test").start_as_current_span("invoke_agent a") as turn:
        await a.process_request("Say hello to B")

    [sent] = [span for span in spans.get_finished_spans() if span.name == "glove.mesh.send"]
    assert sent.parent.span_id == turn.get_span_context().span_id
    assert sent.attributes["glove.mesh.from"] == "a"
    assert sent.attributes["glove.mesh.to"] == "b"
    assert sent.attributes["glove.mesh.outcome"] == "sent"
    assert sent.attributes["glove.mesh.message_id"].startswith("msg_a_")
