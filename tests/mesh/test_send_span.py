"""A mesh send inside a traced turn is a `glove.mesh.send` span (the SDK's in-memory
exporter; outside any trace it costs nothing and records nothing); on the database transport
the recipient's turn that reads the message links to that span."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from tests.core.support import calls
from tests.mesh.conftest import TRANSPORTS
from tests.mesh.support import A, B, eventually


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


@pytest.mark.parametrize("mesh", [TRANSPORTS[2]], indirect=True)  # the database transport
async def test_the_turn_that_reads_a_mesh_message_links_to_its_send(mesh, spans):
    send = calls(("glove_mesh_send_message", {"to": "b", "content": "hello B"}))
    a, _, _ = mesh.agent("a", [send, "Sent."])
    b, _, b_store = mesh.agent("b", ["Hello A."])
    await mesh.mount(a, A)
    await mesh.mount(b, B)
    tracer = trace.get_tracer("test")

    with tracer.start_as_current_span("invoke_agent a"):
        await a.process_request("Say hello to B")

    async def arrived() -> list:
        return [item for item in await b_store.get_inbox_items() if item.status == "resolved"]

    await eventually(arrived)
    with tracer.start_as_current_span("invoke_agent b") as b_turn:
        await b.process_request("Anything new?")

    [sent] = [span for span in spans.get_finished_spans() if span.name == "glove.mesh.send"]
    [read] = [span for span in spans.get_finished_spans() if span.name == "glove.wait inbox"]
    assert read.parent.span_id == b_turn.get_span_context().span_id
    assert [link.context.span_id for link in read.links] == [sent.context.span_id]
    assert read.attributes["glove.wait.channel"] == "mesh"
