"""Switch tracing on in this process when the `OTEL_*` environment asks for it: the SDK's
exporter (`gloveapp.observe.tracing`) and the instrumentation packages for Django (a request a
span; WSGI and ASGI), psycopg (every PostgreSQL statement a span; SQLite is not traced), Redis
and httpx (the model providers' SDKs use httpx).

Called from the turns app's `ready()`, before any server builds its middleware, so every
process (granian's and uvicorn's workers, the turn workers, commands) is set up alike.

Which requests are traced is `TraceGate`'s choice, made before the Django instrumentation's
middleware does any work: that middleware gathers a request's attributes and starts its span
before any sampler is asked, which cost a quarter of a REST request's CPU whether the trace was
kept or not.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re

from django.conf import settings
from django.urls import reverse
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from gloveapp.observe import tracing

logger = logging.getLogger(__name__)
_instrumented = False
# Paths never traced (and STATIC_URL's): probes and scrapes would spend the budget and tell
# nothing.
UNTRACED_PATHS = ("/healthz", "/metrics")
# Requests that post a turn (URL names): always traced, so the turn's trace starts at the
# request that posted it. Tracing one costs about a fortieth of the turn it starts.
TURN_POSTING_URLS = ("message-create", "api-session-agent-turns")
DJANGO_MIDDLEWARE = (
    "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"
)


class TraceGate:
    """Decides which requests the Django instrumentation traces (it wraps its middleware, in
    its place at the top of MIDDLEWARE):

    - a request whose `traceparent` header says sampled: traced, in the caller's trace;
    - one whose `traceparent` says not sampled: not traced, nor anything under it;
    - `/healthz`, `/metrics`, static files: never;
    - a POST that starts a turn (the chat page's message, the agent API's turn): traced;
    - any other: traced while the process's budget allows
      (GLOVE_TRACED_REQUESTS_PER_SECOND, `tracing.RequestBudget`); past it, the request runs
      in `tracing.untraced_context()` and costs next to nothing. A turn it posts is still
      traced, as a trace of its own (`tracing.current_traceparent`)."""

    sync_capable, async_capable = True, False  # as the middleware it wraps

    def __init__(self, get_response) -> None:
        from opentelemetry.instrumentation.django.middleware.otel_middleware import (
            _DjangoMiddleware,
        )

        self.get_response = get_response
        self.traced = _DjangoMiddleware(get_response)
        self.budget = tracing.RequestBudget(settings.GLOVE_TRACED_REQUESTS_PER_SECOND)
        static = str(settings.STATIC_URL or "")
        self.untraced_paths = UNTRACED_PATHS + ((static,) if static.startswith("/") else ())

    def __call__(self, request):
        untraced = self.untraced_context(request)
        if untraced is None:
            return self.traced(request)
        token = otel_context.attach(untraced)
        try:
            return self.get_response(request)
        finally:
            otel_context.detach(token)

    def untraced_context(self, request) -> otel_context.Context | None:
        """None: trace it; else the context to run it in, untraced."""
        if request.path.startswith(self.untraced_paths):
            return tracing.untraced_context()
        header = request.META.get("HTTP_TRACEPARENT")
        if header:
            carrier = {"traceparent": header}
            if state := request.META.get("HTTP_TRACESTATE"):
                carrier["tracestate"] = state
            caller = propagate.extract(carrier)
            span_context = trace.get_current_span(caller).get_span_context()
            if span_context.is_valid:
                return None if span_context.trace_flags.sampled else caller
        if request.method == "POST" and posts_a_turn(request.path):
            return None
        return None if self.budget.take() else tracing.untraced_context()


@functools.cache
def _turn_posting_paths() -> re.Pattern[str]:
    marker = "glove0marker0"

    def paths() -> list[str]:
        return [
            re.escape(reverse(name, args=[marker])).replace(marker, "[^/]+")
            for name in TURN_POSTING_URLS
        ]

    # In a context of its own: building the resolver's index sets an asgiref `Local` (a
    # context variable) per resolver, which the request's thread would carry from then on.
    return re.compile("|".join(contextvars.copy_context().run(paths)))


def posts_a_turn(path: str) -> bool:
    return _turn_posting_paths().fullmatch(path) is not None


def put_the_gate_in_front(middleware: list[str]) -> list[str]:
    """MIDDLEWARE with the instrumentation's middleware replaced by `TraceGate` (which runs
    it for the requests it traces)."""
    gate = f"{__name__}.{TraceGate.__qualname__}"
    return [gate if entry == DJANGO_MIDDLEWARE else entry for entry in middleware]


def setup_tracing() -> bool:
    global _instrumented
    if not tracing.configure():
        return False
    if _instrumented:
        return True
    _instrumented = True
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    instrumentors = (
        DjangoInstrumentor(),
        # Patches psycopg.connect, which Django's backend calls for each new connection: set
        # up here, before the first query opens one. No SQL comments are added to queries.
        PsycopgInstrumentor(),
        RedisInstrumentor(),
        HTTPXClientInstrumentor(),
    )
    for instrumentor in instrumentors:
        try:
            instrumentor.instrument()
        except Exception:
            logger.exception("could not switch on %s", type(instrumentor).__name__)
    settings.MIDDLEWARE = put_the_gate_in_front(list(settings.MIDDLEWARE))
    return True
