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

Tracing never changes a response: the gate runs the instrumentation's hooks itself, and when
one raises (the WSGI instrumentation assumes PEP 3333's Latin-1 text, and granian hands it a
path decoded as UTF-8: `/api/sessions/%E2%82%AC` was a 500) the request goes on untraced.
What a span exports of a credential-bearing route (the signed chat URL, the approvals'
signed links, a password reset) is its route's pattern, never its path or query.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import logging
import re
from typing import Any

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
# Routes whose path is a credential (URL name -> its arguments): exported as their pattern.
CREDENTIAL_URLS = {
    "api-chat-signed": ("token",),
    "approval-link": ("token",),
    "password_reset_confirm": ("uidb64", "token"),
}
# The attributes a server span carries the request's path or query in (both conventions).
URL_ATTRIBUTES = ("http.target", "http.url", "url.path", "url.full", "url.query")
DJANGO_MIDDLEWARE = (
    "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"
)


class TraceGate:
    """Decides which requests the Django instrumentation traces (it wraps its middleware, in
    its place at the top of MIDDLEWARE):

    - a request whose `traceparent` header says sampled, from a trusted caller (one with a
      valid API token, or a proxy of GLOVE_TRACE_TRUSTED_PROXIES): traced, in the caller's
      trace; one that says not sampled: not traced, nor anything under it. From anyone
      else the header is ignored and the request is like any other (the budget decides,
      and a trace it starts is its own), so no anonymous caller can start traces past the
      budget or choose their trace id;
    - `/healthz`, `/metrics`, static files: never;
    - a POST that starts a turn (the chat page's message, the agent API's turn): traced;
    - any other: traced while the process's budget allows
      (GLOVE_TRACED_REQUESTS_PER_SECOND, `tracing.RequestBudget`); past it, the request runs
      in `tracing.untraced_context()` and costs next to nothing. A turn it posts is still
      traced, as a trace of its own (`tracing.current_traceparent`).

    The instrumentation's own hooks run guarded: one that raises leaves the request to run
    untraced, its answer the same as with tracing off."""

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
        self.proxies = trusted_networks(getattr(settings, "GLOVE_TRACE_TRUSTED_PROXIES", ()))

    def __call__(self, request):
        untraced = self.untraced_context(request)
        if untraced is None:
            return self._traced(request)
        return self._untraced(request, untraced)

    def _untraced(self, request, context: otel_context.Context):
        token = otel_context.attach(context)
        try:
            return self.get_response(request)
        finally:
            otel_context.detach(token)

    def _traced(self, request):
        # Whatever the instrumentation attaches, detaching this restores the context as it
        # was (a context variable's reset), should the instrumentation fail half-way.
        before = otel_context.attach(otel_context.get_current())
        try:
            self.traced.process_request(request)
            conceal_credentials(request, self.traced)
        except Exception:
            logger.warning("tracing failed on a request; it runs untraced", exc_info=True)
            self._abandon(request, before)
            return self._untraced(request, tracing.untraced_context())
        response = self.get_response(request)
        try:
            response = self.traced.process_response(request, response)
        except Exception:
            logger.warning("tracing failed on a response; it is sent untraced", exc_info=True)
            self._abandon(request, None)
        finally:
            otel_context.detach(before)
        return response

    def _abandon(self, request, before: object) -> None:
        """Ends what the instrumentation started for `request` and restores the context."""
        meta = request.META
        activation = meta.pop(self.traced._environ_activation_key, None)
        span = meta.pop(self.traced._environ_span_key, None)
        meta.pop(self.traced._environ_token, None)
        try:
            if activation is not None:
                activation.__exit__(None, None, None)
            elif span is not None:
                span.end()
        except Exception:
            logger.debug("an abandoned request span did not end", exc_info=True)
        if before is not None:
            otel_context.detach(before)

    def process_view(self, request, view_func, view_args, view_kwargs):
        """The route (`http.route`) on the request's span, as the instrumentation does."""
        try:
            self.traced.process_view(request, view_func, view_args, view_kwargs)
        except Exception:
            logger.debug("tracing failed to name a request's route", exc_info=True)

    def untraced_context(self, request) -> otel_context.Context | None:
        """None: trace it; else the context to run it in, untraced."""
        if request.path.startswith(self.untraced_paths):
            return tracing.untraced_context()
        header = request.META.get("HTTP_TRACEPARENT")
        if header and self.trusts(request):
            carrier = {"traceparent": header}
            if state := request.META.get("HTTP_TRACESTATE"):
                carrier["tracestate"] = state
            caller = propagate.extract(carrier)
            span_context = trace.get_current_span(caller).get_span_context()
            if span_context.is_valid:
                return None if span_context.trace_flags.sampled else caller
        elif header:
            ignore_trace_headers(request)
        if request.method == "POST" and posts_a_turn(request.path):
            return None
        return None if self.budget.take() else tracing.untraced_context()

    def trusts(self, request) -> bool:
        """May this caller choose the trace: a configured proxy, or a valid API token."""
        if self.proxies and _address_in(request.META.get("REMOTE_ADDR", ""), self.proxies):
            return True
        return bool(request.META.get("HTTP_AUTHORIZATION")) and token_authenticates(request)


def ignore_trace_headers(request) -> None:
    """The caller's `traceparent` / `tracestate`, gone from what the instrumentation reads
    (the WSGI environ, or the ASGI scope's headers): a trace it starts is its own."""
    request.META.pop("HTTP_TRACEPARENT", None)
    request.META.pop("HTTP_TRACESTATE", None)
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and "headers" in scope:
        scope["headers"] = [
            (name, value)
            for name, value in scope["headers"]
            if name.lower() not in (b"traceparent", b"tracestate")
        ]


def trusted_networks(entries: Any) -> tuple[Any, ...]:
    """GLOVE_TRACE_TRUSTED_PROXIES' addresses and networks (`10.0.0.5`, `10.1.0.0/16`)."""
    return tuple(ipaddress.ip_network(str(entry).strip(), strict=False) for entry in entries)


def _address_in(address: str, networks: tuple[Any, ...]) -> bool:
    try:
        found = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(found in network for network in networks)


def token_authenticates(request) -> bool:
    """Whether one of DRF's configured authentications, other than the session's (the user
    is not known yet here), accepts the request's credentials. Any error is a no."""
    from rest_framework.authentication import SessionAuthentication
    from rest_framework.request import Request
    from rest_framework.settings import api_settings

    wrapped = Request(request)
    for authentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES:
        if issubclass(authentication, SessionAuthentication):
            continue
        try:
            if authentication().authenticate(wrapped) is not None:
                return True
        except Exception:
            return False
    return False


def conceal_credentials(request, middleware: Any) -> None:
    """A credential-bearing route's span says its route's pattern, never the path or query."""
    span = request.META.get(middleware._environ_span_key)
    route = credential_route(request.path_info)
    if span is None or route is None:
        return
    pattern = "/" + route
    attributes = getattr(span, "attributes", None) or {}
    for key in URL_ATTRIBUTES:
        if key in attributes:
            span.set_attribute(key, "" if key == "url.query" else pattern)
    measured = request.META.get(middleware._environ_duration_attr_key)
    if isinstance(measured, dict):
        for key in URL_ATTRIBUTES:
            if key in measured:
                measured[key] = "" if key == "url.query" else pattern


def credential_route(path: str) -> str | None:
    """The pattern of the credential-bearing route `path` is on (`api/chat/<str:token>`)."""
    for matcher, route in _credential_routes():
        if matcher.fullmatch(path):
            return route
    return None


@functools.cache
def _credential_routes() -> tuple[tuple[re.Pattern[str], str], ...]:
    from django.urls import NoReverseMatch, resolve

    marker = "glove0marker0"

    def routes() -> list[tuple[re.Pattern[str], str]]:
        found = []
        for name, arguments in CREDENTIAL_URLS.items():
            try:
                path = reverse(name, kwargs=dict.fromkeys(arguments, marker))
            except NoReverseMatch:
                continue
            route = str(resolve(path).route)
            found.append((re.compile(re.escape(path).replace(marker, "[^/]+")), route))
        return found

    # In a context of its own, as `_turn_posting_paths`.
    return tuple(contextvars.copy_context().run(routes))


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
