"""A user's sockets close when they log out or their password changes: an open socket must
not keep streaming to a browser whose login has ended."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from tests.live.conftest import FRAME_TIMEOUT, acommit_event, cookie_for, frames, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def opened(communicator):
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    return communicator


async def closing_code(communicator) -> int:
    output = await communicator.receive_output(timeout=FRAME_TIMEOUT)
    assert output["type"] == "websocket.close", output
    return output["code"]


def client_with(cookie: str) -> Client:
    client = Client()
    name, _, value = cookie.partition("=")
    client.cookies[name] = value
    return client


async def test_it_closes_a_users_sockets_when_they_log_out(chat, owner_cookie):
    first = await opened(socket(chat.id, owner_cookie))
    second = await opened(socket(chat.id, owner_cookie))

    answer = await database_sync_to_async(client_with(owner_cookie).post)("/accounts/logout/")

    assert answer.status_code == 302
    assert await closing_code(first) == 4401
    assert await closing_code(second) == 4401


async def test_it_closes_a_users_sockets_when_their_password_changes(chat, owner):
    communicator = await opened(socket(chat.id, await database_sync_to_async(cookie_for)(owner)))

    def change_password() -> None:
        owner.set_password("a new and different password")
        owner.save()

    await database_sync_to_async(change_password)()

    assert await closing_code(communicator) == 4401


async def test_it_leaves_other_users_sockets_open(chat, owner_cookie, staff):
    staff_socket = await opened(socket(chat.id, await database_sync_to_async(cookie_for)(staff)))
    owner_socket = await opened(socket(chat.id, owner_cookie))

    await database_sync_to_async(client_with(owner_cookie).post)("/accounts/logout/")
    assert await closing_code(owner_socket) == 4401
    event_id = await acommit_event(chat.id, title="Still streaming")

    assert (await frames(staff_socket, 1))[0]["id"] == event_id
    await staff_socket.disconnect()


async def test_it_keeps_sockets_open_when_a_user_logs_in_again(chat, owner, owner_cookie):
    communicator = await opened(socket(chat.id, owner_cookie))

    await database_sync_to_async(cookie_for)(owner)  # another login: last_login is saved
    event_id = await acommit_event(chat.id, title="Still yours")

    assert (await frames(communicator, 1))[0]["id"] == event_id
    await communicator.disconnect()


async def test_it_closes_a_users_sockets_on_logout_while_redis_is_away(
    chat, owner_cookie, own_redis, settings
):
    # The channel layer's Redis dies after the sockets opened: its message is dropped, and
    # the logout stored in the event log closes them anyway.
    from gloveapp.settings import channel_layers_for

    settings.REDIS_URL = own_redis.url()
    settings.CHANNEL_LAYERS = channel_layers_for(own_redis.url())
    first = await opened(socket(chat.id, owner_cookie))
    own_redis.kill()

    answer = await database_sync_to_async(client_with(owner_cookie).post)("/accounts/logout/")

    assert answer.status_code == 302
    assert await closing_code(first) == 4401
    await first.wait()
