"""The pages' and the API's middleware: Django's Content-Security-Policy on every answer,
and Django's messages, their storage built only when a request uses it
(gloveapp/lib/http/middleware.py), which is what Django's own MessageMiddleware lacks."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib import messages
from django.contrib.messages.middleware import MessageMiddleware as DjangosMessageMiddleware
from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.utils.csp import CSP

from gloveapp.lib.http.middleware import MessageMiddleware

pytestmark = pytest.mark.django_db


def test_the_policy_is_the_same_on_api_and_pages():
    policy = Client().get("/healthz")["Content-Security-Policy"]
    assert policy == Client().get("/accounts/login/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_a_changed_setting_changes_the_header_at_once(settings):
    settings.SECURE_CSP = {"default-src": [CSP.SELF], "img-src": [CSP.SELF]}
    assert (
        Client().get("/healthz")["Content-Security-Policy"] == "default-src 'self'; img-src 'self'"
    )
    settings.SECURE_CSP = {}
    assert "Content-Security-Policy" not in Client().get("/healthz")


def test_a_views_override_is_kept():
    docs = Client().get("/api/docs/")["Content-Security-Policy"]
    assert "style-src 'self' 'unsafe-inline'" in docs


class CountingStorage(FallbackStorage):
    """Django's default message storage, counting how often a request built one."""

    built = 0

    def __init__(self, request, *args, **kwargs):
        type(self).built += 1
        super().__init__(request, *args, **kwargs)


def _view(request):
    if request.GET.get("add"):
        messages.info(request, "Saved.")
    if request.GET.get("read"):
        request.seen = [str(message) for message in messages.get_messages(request)]
    return HttpResponse()


@pytest.mark.parametrize("middleware_class", [MessageMiddleware, DjangosMessageMiddleware])
def test_messages_are_built_only_when_used_and_still_reach_the_next_page(
    client, settings, middleware_class
):
    settings.MESSAGE_STORAGE = f"{__name__}.CountingStorage"
    CountingStorage.built = 0
    middleware = middleware_class(_view)

    untouched = RequestFactory().get("/")
    untouched.session = client.session
    assert "messages" not in middleware(untouched).cookies
    # What ours is for: an API call builds no storage; Django's builds one for every request.
    assert CountingStorage.built == (0 if middleware_class is MessageMiddleware else 1)

    added = RequestFactory().get("/?add=1")
    added.session = client.session
    cookie = middleware(added).cookies["messages"]
    next_page = RequestFactory().get("/?read=1", HTTP_COOKIE=f"messages={cookie.value}")
    next_page.session = client.session
    middleware(next_page)
    assert next_page.seen == ["Saved."]


def test_whitenoise_runs_async_under_asgi_which_its_own_middleware_cannot():
    from asgiref.sync import iscoroutinefunction
    from whitenoise.middleware import WhiteNoiseMiddleware as WhiteNoisesOwn

    from gloveapp.lib.http.middleware import WhiteNoiseMiddleware

    async def view(request):
        return HttpResponse("from the view")

    # WhiteNoise's is sync only: Django would run each ASGI request through a thread for it.
    assert not getattr(WhiteNoisesOwn, "async_capable", False)
    ours = WhiteNoiseMiddleware(view)
    assert iscoroutinefunction(ours)
    response = asyncio.run(ours(RequestFactory().get("/api/sessions")))
    assert response.content == b"from the view"


def _served(middleware, path: str) -> tuple[int, dict]:
    response = middleware(RequestFactory().get(path))
    return response.status_code, {k: v for k, v in response.items() if k != "Date"}


def test_whitenoise_built_again_serves_what_its_own_finds(settings, tmp_path):
    """The finders' index is kept per configuration (gloveapp/lib/http/middleware.py): a
    middleware built again serves the files and headers WhiteNoise's own builds, and a
    changed STATICFILES_DIRS is a new index."""
    from whitenoise.middleware import WhiteNoiseMiddleware as WhiteNoisesOwn

    from gloveapp.lib.http.middleware import WhiteNoiseMiddleware

    def view(request):
        return HttpResponse("not a static file", status=404)

    path = "/static/admin/css/base.css"
    WhiteNoiseMiddleware(view)
    again = WhiteNoiseMiddleware(view)
    assert again.files.keys() == WhiteNoisesOwn(view).files.keys()
    assert _served(again, path) == _served(WhiteNoisesOwn(view), path)
    assert _served(again, path)[0] == 200

    (tmp_path / "added.txt").write_text("new")
    settings.STATICFILES_DIRS = [*settings.STATICFILES_DIRS, tmp_path]
    assert _served(WhiteNoiseMiddleware(view), "/static/added.txt")[0] == 200
    assert _served(again, "/static/added.txt")[0] == 404
