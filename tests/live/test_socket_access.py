"""Who may watch a session: its owner and staff; everyone else is closed with a 44xx code."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from gloveapp.conversations.services import session_create
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, cookie_for, frames, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def refusal_code(communicator) -> int:
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected  # accepted first, so that the browser can read the code
    closing = await communicator.receive_output(timeout=FRAME_TIMEOUT)
    assert closing["type"] == "websocket.close"
    await communicator.disconnect()
    return closing["code"]


async def test_it_lets_the_owner_watch_their_session(chat, owner_cookie):
    communicator = socket(chat.id, owner_cookie)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    event_id = await acommit_event(chat.id, title="Espresso")
    assert await frames(communicator, 1) == [
        {"id": event_id, "type": "session.updated", "payload": {"title": "Espresso"}}
    ]
    await communicator.disconnect()


async def test_it_closes_an_anonymous_socket(chat):
    assert await refusal_code(socket(chat.id)) == 4401


async def test_it_closes_another_users_socket_as_if_the_session_did_not_exist(chat, other_cookie):
    # The same code as an unknown id: the close must not tell an outsider the id is taken.
    outsider = await refusal_code(socket(chat.id, other_cookie))
    unknown = await refusal_code(socket("no-such-session", other_cookie))

    assert outsider == unknown == 4404


async def test_it_closes_a_socket_for_an_unknown_session(owner_cookie):
    assert await refusal_code(socket("no-such-session", owner_cookie)) == 4404


async def test_it_lets_staff_watch_any_session(chat, staff):
    communicator = socket(chat.id, await database_sync_to_async(cookie_for)(staff))
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    event_id = await acommit_event(chat.id, title="Espresso")
    assert (await frames(communicator, 1))[0]["id"] == event_id
    await communicator.disconnect()


async def test_it_sends_nothing_to_a_refused_socket_before_closing(chat, other_cookie):
    await acommit_event(chat.id, title="secret")
    communicator = socket(chat.id, other_cookie, last_event_id=0)
    assert await refusal_code(communicator) == 4404


async def test_it_streams_each_user_their_own_session_under_one_id(chat, other_user, other_cookie):
    # Ids are per owner: the other user's session may have the owner's id; their socket
    # follows theirs, replayed from its start (event ids count per stream), never the owner's.
    await acommit_event(chat.id, title="Espresso")
    cursor = 0
    theirs = await database_sync_to_async(session_create)(
        owner=other_user, session_id=chat.key, title="Tea"
    )
    await acommit_event(chat.id, title="the owner's secret")
    communicator = socket(chat.key, other_cookie, last_event_id=cursor)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    await acommit_event(theirs.id, title="Darjeeling")

    created, changed = await frames(communicator, 2)
    assert created["payload"]["session"]["id"] == chat.key  # their own id, not the global one
    assert created["payload"]["session"]["title"] == "Tea"
    assert changed["payload"] == {"title": "Darjeeling"}
    await communicator.disconnect()
