"""Who may watch a session: its owner and staff; everyone else is closed with a 44xx code."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

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
