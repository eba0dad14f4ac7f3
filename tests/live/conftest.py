"""Fixtures for the live-update tests: real sockets through the ASGI app, real layers.

Events must commit to be relayed, so these tests use transactional databases.
"""

from __future__ import annotations

import pytest
import redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.test import Client

from gloveapp.asgi import application
from gloveapp.conversations.models import Session
from gloveapp.live.eventlog import record_event
from gloveapp.live.hub import stop_hub
from gloveapp.live.relay import stop_relay
from gloveapp.live.streams import session_stream
from gloveapp.settings import channel_layers_for

# Frames arrive within milliseconds; this only bounds how long a broken test hangs.
FRAME_TIMEOUT = 10


@pytest.fixture(params=["memory", "redis"])
async def layer(request, settings):
    """Run the test on the in-memory channel layer and on Redis (channels_redis).

    On the run's own Redis database (TEST_REDIS_URL: each of `make test`'s passes has its
    own), never a fixed one: the SQLite and PostgreSQL passes run these tests at the same
    time with the same stream names, and a shared database gave one pass's socket the
    other's frames (a transient `text_delta` reaching `test_resume`'s up-to-date socket)
    and emptied its groups with the other's `flushdb`."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        redis.Redis.from_url(url).flushdb()
    else:
        url = ""
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = channel_layers_for(url)
    yield request.param
    await stop_relay()
    await stop_hub()
    channel_layer = get_channel_layer()
    if hasattr(channel_layer, "close_pools"):
        await channel_layer.close_pools()


@pytest.fixture(autouse=True)
async def _stop_relay_after_test():
    yield
    await stop_relay()
    await stop_hub()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("other")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", is_staff=True)


@pytest.fixture
def chat(owner) -> Session:
    return Session.objects.create(id="chat-1", key="chat-1", owner=owner, title="Coffee")


@pytest.fixture
def other_chat(other_user) -> Session:
    return Session.objects.create(id="chat-2", key="chat-2", owner=other_user, title="Tea")


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.fixture
def owner_cookie(owner) -> str:
    return cookie_for(owner)


@pytest.fixture
def other_cookie(other_user) -> str:
    return cookie_for(other_user)


def socket(session_id: str, cookie: str | None = None, *, last_event_id: int | None = None):
    path = f"/ws/sessions/{session_id}/"
    if last_event_id is not None:
        path += f"?last_event_id={last_event_id}"
    headers = [(b"origin", b"http://testserver")]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def open_socket(session_id: str, cookie: str, **kwargs) -> WebsocketCommunicator:
    communicator = socket(session_id, cookie, **kwargs)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    return communicator


async def frames(communicator: WebsocketCommunicator, count: int) -> list[dict]:
    return [await communicator.receive_json_from(timeout=FRAME_TIMEOUT) for _ in range(count)]


def commit_event(session_id: str, type: str = "session.updated", **payload) -> int:
    """A change made the way services make it: the event inside a committed transaction;
    returns the id a client sees (its number in the session's stream)."""
    with transaction.atomic():
        return record_event(stream=session_stream(session_id), type=type, payload=payload).seq


# Its own thread and connection (closed afterwards), like a request or a worker.
acommit_event = database_sync_to_async(commit_event, thread_sensitive=False)
