"""A turn attempt's spans leave the process with its `invoke_agent`, never before: the
spans of an attempt whose worker dies are never exported without their parent."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gloveapp.observe.held_spans import HoldAttemptSpans


def _tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(HoldAttemptSpans(SimpleSpanProcessor(exporter)))
    return provider.get_tracer("test"), exporter


def _names(exporter) -> list[str]:
    return [span.name for span in exporter.get_finished_spans()]


def test_an_attempts_spans_go_out_with_its_invoke_agent_span():
    tracer, exporter = _tracer()
    with tracer.start_as_current_span("POST messages"):
        pass
    with tracer.start_as_current_span(
        "invoke_agent coffee", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span("chat demo"):
            pass
        with tracer.start_as_current_span("execute_tool menu"):
            with tracer.start_as_current_span("SELECT"):
                pass
        assert _names(exporter) == ["POST messages"]  # the attempt's spans are held

    assert _names(exporter) == [
        "POST messages",
        "chat demo",
        "SELECT",
        "execute_tool menu",
        "invoke_agent coffee",
    ]


def test_the_spans_of_an_attempt_that_never_ends_are_never_sent():
    tracer, exporter = _tracer()
    root = tracer.start_span(
        "invoke_agent coffee", attributes={"gen_ai.operation.name": "invoke_agent"}
    )
    with trace.use_span(root, end_on_exit=False), tracer.start_as_current_span("chat demo"):
        pass
    # The worker dies here: `invoke_agent` never ends, and nothing under it was sent.

    assert _names(exporter) == []


def test_a_subagents_attempt_is_held_with_its_parents():
    tracer, exporter = _tracer()
    with tracer.start_as_current_span(
        "invoke_agent coffee", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span(
            "invoke_agent roastery", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            with tracer.start_as_current_span("chat demo"):
                pass
        assert _names(exporter) == []

    assert _names(exporter) == ["chat demo", "invoke_agent roastery", "invoke_agent coffee"]
