"""The event stream is served beside Django (an ASGI app of its own) under Django's rules all
the same: a Host outside ALLOWED_HOSTS is the API's 400, and its responses carry the security
headers Django's middleware puts on the API's (issue 33)."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.conversations.services import session_create
from gloveapp.live.relay import stop_relay
from tests.api.sse_asgi import SseStream

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SECURITY_HEADERS = (
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
    "X-Frame-Options",
    "Content-Security-Policy",
)


@pytest.fixture(autouse=True)
async def _stop_relay_after_test():
    yield
    await stop_relay()  # its connection, so the test database can be dropped


def a_session(django_user_model) -> tuple[str, str]:
    owner = django_user_model.objects.create_user("host-owner")
    session = session_create(owner=owner, agent_name="coffee", title="Host")
    return session.key, Token.objects.create(user=owner).key


def django_answer(token: str, host: str) -> tuple[int, dict, dict]:
    """What Django's own API routes answer from that Host (the rules to match)."""
    client = APIClient(HTTP_HOST=host)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/sessions")
    return response.status_code, response.json(), dict(response.headers)


async def test_a_host_outside_allowed_hosts_is_the_apis_400(settings, django_user_model):
    settings.ALLOWED_HOSTS = ["shop.example"]
    key, token = await database_sync_to_async(a_session)(django_user_model)
    status, body, _ = await database_sync_to_async(django_answer)(token, "evil.example")

    async with SseStream(f"/api/sessions/{key}/events", token, host="evil.example") as stream:
        assert stream.status == status == 400
        assert json.loads(await stream.body()) == body == {"error": "Bad request.", "field": None}
    # No login, no session looked up: refused before anything else, even without a token.
    async with SseStream("/api/sessions/anything/events", host="evil.example") as anonymous:
        assert anonymous.status == 400


async def test_the_stream_carries_the_apis_security_headers(settings, django_user_model):
    settings.ALLOWED_HOSTS = ["shop.example"]
    key, token = await database_sync_to_async(a_session)(django_user_model)
    _, _, expected = await database_sync_to_async(django_answer)(token, "shop.example")

    async with SseStream(f"/api/sessions/{key}/events", token, host="shop.example") as stream:
        assert stream.status == 200
        assert stream.headers["content-type"] == "text/event-stream"
        for name in SECURITY_HEADERS:
            assert stream.headers[name.lower()] == expected[name], name
    async with SseStream("/api/sessions/glove_nobody/events", token, host="shop.example") as gone:
        assert gone.status == 404
        for name in SECURITY_HEADERS:
            assert gone.headers[name.lower()] == expected[name], name
