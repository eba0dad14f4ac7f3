"""Traces with the OpenTelemetry SDK, configured by the standard `OTEL_*` variables.

Tracing is on when an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; OTLP over HTTP, protobuf), unless `OTEL_SDK_DISABLED`
is true or `OTEL_TRACES_EXPORTER` says `none`. Otherwise no SDK is set up: the API's tracer
is a no-op and a span costs a function call. The spans and their attributes are declared in
`catalogue.SPANS` (the docs' reference). Prompt and completion text are never recorded.

Django-free: the Django, Redis and httpx instrumentation is switched on by `gloveapp.lib.telemetry`.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

TRACER_NAME = "gloveapp"
CLIENT = trace.SpanKind.CLIENT
_lock = threading.Lock()
_configured = False


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces to be exported."""
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if "otlp" not in exporters.split(","):
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


def configure(service_name: str = "glove-django") -> bool:
    """Set up the SDK's tracer provider with an OTLP/HTTP exporter, once per process, when
    the environment asks for it; returns whether tracing is on."""
    global _configured
    if _configured:
        return True
    if not wanted():
        return False
    with _lock:
        if _configured:
            return True
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from gloveapp.observe.held_spans import HoldAttemptSpans

        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create.
        resource = Resource.create({"service.name": service_name}).merge(Resource.create())
        # OTEL_TRACES_SAMPLER, when set, is the SDK's to read; else `default_sampler()`.
        sampler = None if os.environ.get("OTEL_TRACES_SAMPLER") else default_sampler()
        provider = TracerProvider(resource=resource, sampler=sampler)
        # An attempt's spans go out with its `invoke_agent` (none if its worker dies first).
        provider.add_span_processor(HoldAttemptSpans(BatchSpanProcessor(OTLPSpanExporter())))
        trace.set_tracer_provider(provider)
        _configured = True
    return True


def default_sampler() -> Any:
    """Parent-based (a span follows the trace it is in), and at the root everything but a
    client call with nothing above it: a turn worker's polling statements, a Redis command
    outside any request or turn, each a trace of its own (an idle worker sent eight a
    second), would bury the traces that mean something."""
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ALWAYS_ON,
        ParentBased,
        Sampler,
        SamplingResult,
    )

    class NoLoneClientCalls(Sampler):
        def should_sample(
            self,
            parent_context: Any,
            trace_id: int,
            name: str,
            kind: trace.SpanKind | None = None,
            *args: Any,
            **kwargs: Any,
        ) -> SamplingResult:
            decide = ALWAYS_OFF if kind == trace.SpanKind.CLIENT else ALWAYS_ON
            return decide.should_sample(parent_context, trace_id, name, kind, *args, **kwargs)

        def get_description(self) -> str:
            return "NoLoneClientCalls"

    return ParentBased(root=NoLoneClientCalls())


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def current_traceparent() -> str:
    """The W3C `traceparent` of the current span ("" when none is sampled): stored with a
    turn, so the worker's spans join the trace of the request that posted it. A turn posted
    by a request that was not traced starts a trace of its own."""
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid or not span_context.trace_flags.sampled:
        return ""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


def context_from(traceparent: str) -> otel_context.Context | None:
    if not traceparent:
        return None
    return propagate.extract({"traceparent": traceparent})


def root_or_under(traceparent: str) -> otel_context.Context:
    """The context a span starts in: under a stored `traceparent`, else at the root of a
    trace of its own (never under whatever the current context holds)."""
    return context_from(traceparent) or otel_context.Context()


def untraced_context() -> otel_context.Context:
    """A context whose span is valid but not sampled: what runs in it (a request left out
    by the `RequestBudget`) starts no trace, and the instrumentation's
    spans under it (statements, Redis calls) are dropped at once by the parent-based
    sampler instead of each becoming a trace of its own."""
    span_context = trace.SpanContext(
        trace_id=random.getrandbits(128) or 1,
        span_id=random.getrandbits(64) or 1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


class RequestBudget:
    """At most `per_second` new traces a second (a token bucket holding one second's worth,
    at least one): what keeps tracing's cost bounded when requests come fast. With a few
    requests a second every one is traced; under load, the share traced falls so that the
    work of tracing stays at `per_second` traces a second. `math.inf`: every one; 0: none."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.capacity = max(1.0, per_second) if math.isfinite(per_second) else math.inf
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        if self.per_second <= 0:
            return False
        if not math.isfinite(self.per_second):
            return True
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.per_second)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


def link_to(traceparent: str) -> trace.Link | None:
    """A span link to the span a stored `traceparent` names (None: none stored)."""
    if not traceparent:
        return None
    span_context = trace.get_current_span(context_from(traceparent)).get_span_context()
    return trace.Link(span_context) if span_context.is_valid else None


def start(name: str, *, parent: otel_context.Context | None = None, **kwargs: Any) -> Any:
    return tracer().start_span(name, context=parent, **kwargs)


def attach(span: Any) -> object:
    """Make `span` the current one (for the spans started under it); `detach` the token."""
    return otel_context.attach(trace.set_span_in_context(span))


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


def recording() -> bool:
    return trace.get_current_span().is_recording()


def span_between(
    name: str,
    *,
    start_ns: int,
    end_ns: int,
    attributes: dict[str, Any],
    error: str = "",
    parent: Any = None,
    links: tuple[str, ...] = (),
) -> None:
    """A span for something already over (a tool call, a wait), under `parent` (a span)
    or else the current span; nothing when that one is not recording. `links`: stored
    traceparents of what it follows from in other processes (an inbox item's resolution)."""
    if parent is None:
        if not recording():
            return
        context = None
    elif parent.is_recording():
        context = trace.set_span_in_context(parent)
    else:
        return
    span = tracer().start_span(
        name,
        context=context,
        start_time=start_ns,
        attributes=attributes,
        links=[link for link in map(link_to, links) if link is not None] or None,
    )
    if error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    span.end(end_time=end_ns)


def wanted_here() -> bool:
    """Whether this process exports traces (`configure` set the SDK up)."""
    return _configured


def error_status(description: str) -> trace.Status:
    return trace.Status(trace.StatusCode.ERROR, description)


@contextmanager
def child_span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A span under the current one while the block runs; nothing at all (None) when no
    span is recording, so code outside a traced turn pays nothing."""
    if not recording():
        yield None
        return
    with tracer().start_as_current_span(name, attributes=attributes) as span:
        yield span


@contextmanager
def span_here(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A span while the block runs when this process exports traces: a child of the
    current span (a request's), or a trace of its own (a command, a scheduler). None, and
    nothing done, when it does not."""
    if not _configured:
        yield None
        return
    with tracer().start_as_current_span(name, attributes=attributes) as span:
        yield span
