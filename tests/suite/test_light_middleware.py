"""Django's CSP and messages middleware, made cheaper per request (gloveapp/middleware.py),
answer as Django's do: the same policy header, a view's override, a changed setting, a used
nonce, and flash messages that still reach the next page."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.http import HttpResponse
from django.middleware.csp import ContentSecurityPolicyMiddleware as DjangoCSPMiddleware
from django.test import Client, RequestFactory
from django.utils.csp import CSP, LazyNonce
from django.views.decorators.csp import csp_override

from gloveapp.middleware import ContentSecurityPolicyMiddleware, MessageMiddleware

pytestmark = pytest.mark.django_db


def _both(request_factory, view):
    """The header from ours and from Django's middleware for the same request and view."""
    headers = []
    for middleware_class in (ContentSecurityPolicyMiddleware, DjangoCSPMiddleware):
        request = request_factory()
        middleware = middleware_class(view)
        middleware.process_request(request)
        headers.append(middleware.process_response(request, view(request)))
    return headers


def test_the_policy_is_djangos_on_api_and_pages_alike(settings):
    policy = Client().get("/healthz")["Content-Security-Policy"]
    assert policy == Client().get("/accounts/login/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    ours, django = _both(lambda: RequestFactory().get("/"), lambda request: HttpResponse())
    assert ours["Content-Security-Policy"] == django["Content-Security-Policy"] == policy


def test_a_changed_setting_changes_the_header_at_once(settings):
    settings.SECURE_CSP = {"default-src": [CSP.SELF], "img-src": [CSP.SELF]}
    assert (
        Client().get("/healthz")["Content-Security-Policy"] == "default-src 'self'; img-src 'self'"
    )
    # Changed in place, the same dict: noticed too.
    settings.SECURE_CSP["img-src"].append("https://images.example")
    assert Client().get("/healthz")["Content-Security-Policy"] == (
        "default-src 'self'; img-src 'self' https://images.example"
    )
    settings.SECURE_CSP = {}
    assert "Content-Security-Policy" not in Client().get("/healthz")


def test_a_views_override_and_report_only_policy_are_kept():
    docs = Client().get("/api/docs/")["Content-Security-Policy"]
    assert "style-src 'self' 'unsafe-inline'" in docs

    @csp_override({"default-src": [CSP.NONE]})
    def view(request):
        return HttpResponse()

    ours, django = _both(lambda: RequestFactory().get("/"), view)
    assert (
        ours["Content-Security-Policy"] == django["Content-Security-Policy"] == "default-src 'none'"
    )


def test_a_used_nonce_is_in_the_header(settings):
    settings.SECURE_CSP = {"script-src": [CSP.SELF, CSP.NONCE]}
    request = RequestFactory().get("/")
    middleware = ContentSecurityPolicyMiddleware(lambda request: HttpResponse())
    middleware.process_request(request)
    assert isinstance(request._csp_nonce, LazyNonce)
    nonce = str(request._csp_nonce)  # a template used it
    header = middleware.process_response(request, HttpResponse())["Content-Security-Policy"]
    assert header == f"script-src 'self' 'nonce-{nonce}'"
    # The next request's unused nonce is left out, as Django leaves it out.
    request = RequestFactory().get("/")
    middleware.process_request(request)
    header = middleware.process_response(request, HttpResponse())["Content-Security-Policy"]
    assert header == "script-src 'self'"


def test_messages_are_stored_only_when_used_and_still_reach_the_next_page(client, settings):
    seen = []

    def view(request):
        if request.GET.get("add"):
            messages.info(request, "Saved.")
        seen.extend(str(message) for message in messages.get_messages(request))
        return HttpResponse()

    middleware = MessageMiddleware(view)
    untouched = RequestFactory().get("/")
    untouched.session = client.session
    response = middleware(untouched)
    assert "messages" not in response.cookies  # nothing built, nothing stored
    added = RequestFactory().get("/?add=1")
    added.session = client.session
    middleware(added)
    assert seen == ["Saved."]
