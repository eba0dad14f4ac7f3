"""One socket that cannot take an event does not stop the others, and a deleted session's
sockets close.

A poison event must not stop live updates for everybody else in the process; a socket is
authorised only when it connects, so it must not outlive its session (whose id a new owner
could otherwise take over).
"""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from gloveapp.conversations import services
from gloveapp.conversations.models import Session
from gloveapp.core.types import Message
from gloveapp.live.consumers import StreamConsumer
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, frames, open_socket, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _refuse_poison(monkeypatch) -> list[int]:
    """Make every socket refuse an event whose payload says `poison` (as a send that raises
    would); returns the ids refused, one entry per socket and attempt."""
    send = StreamConsumer.send
    refused: list[int] = []

    async def refusing_send(self, text_data=None, bytes_data=None, close=False):
        # Stored events reach the socket already encoded, once for all sockets (issue 13).
        content = json.loads(text_data) if text_data else {}
        if content.get("payload", {}).get("poison"):
            refused.append(content["id"])
            raise TypeError("can not send this payload")
        await send(self, text_data=text_data, bytes_data=bytes_data, close=close)

    monkeypatch.setattr(StreamConsumer, "send", refusing_send)
    return refused


async def test_it_skips_an_event_a_socket_cannot_take_and_relays_the_next(
    layer, chat, other_chat, owner_cookie, other_cookie, monkeypatch, caplog
):
    mine = await open_socket(chat.id, owner_cookie)
    also_mine = await open_socket(chat.id, owner_cookie)
    theirs = await open_socket(other_chat.id, other_cookie)
    refused = _refuse_poison(monkeypatch)

    poison = await acommit_event(chat.id, "message.appended", poison=True)
    after = await acommit_event(chat.id, "message.appended", seq=1)
    elsewhere = await acommit_event(other_chat.id, "message.appended", seq=2)

    assert [frame["id"] for frame in await frames(mine, 1)] == [after]
    assert [frame["id"] for frame in await frames(also_mine, 1)] == [after]
    assert [frame["id"] for frame in await frames(theirs, 1)] == [elsewhere]
    assert refused == [poison, poison]  # once per socket, never retried
    assert any(f"deliver event {poison}" in record.getMessage() for record in caplog.records)
    for communicator in (mine, also_mine, theirs):
        await communicator.disconnect()


async def test_it_delivers_a_payload_redis_could_not_encode(layer, chat, owner_cookie):
    # msgpack (channels_redis) has no encoding for integers beyond 64 bits; stored events
    # go from the relay to the socket without the channel layer, as JSON, which holds it.
    communicator = await open_socket(chat.id, owner_cookie)
    huge = await acommit_event(chat.id, "message.appended", n=2**70)
    after = await acommit_event(chat.id, "message.appended", seq=1)

    received = await frames(communicator, 2)

    assert [frame["id"] for frame in received] == [huge, after]
    assert received[0]["payload"] == {"n": 2**70}
    await communicator.disconnect()


async def test_it_closes_the_owners_socket_when_the_session_is_deleted(layer, chat, owner_cookie):
    communicator = await open_socket(chat.id, owner_cookie)
    session = await database_sync_to_async(Session.objects.get)(pk=chat.id)

    await database_sync_to_async(services.session_delete)(session=session)

    frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT)
    assert (frame["type"], frame["payload"]) == ("session.deleted", {"id": chat.id})
    assert await communicator.receive_output(timeout=FRAME_TIMEOUT) == {
        "type": "websocket.close",
        "code": 4404,
    }
    # Whatever is recorded on the stream afterwards never reaches it.
    await acommit_event(chat.id, "message.appended", text="someone else's")
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_it_never_gives_a_deleted_sessions_id_and_events_to_a_new_owner(
    layer, owner, other_user, owner_cookie, other_cookie
):
    cursor = 0  # the new session's stream from its start (event ids count per stream)
    create = database_sync_to_async(services.session_create)
    session = await create(owner=owner, session_id="shared-name")
    await database_sync_to_async(services.messages_append)(
        session_id="shared-name",
        messages=[Message(sender="user", text="my card ends 4242")],
    )
    await database_sync_to_async(services.session_delete)(session=session)

    # Its owner never gets the id again; another user gets it (ids are per owner) as a new
    # session on a stream of its own, which the old events are not on.
    with pytest.raises(services.DuplicateSession):
        await create(owner=owner, session_id="shared-name")
    theirs = await create(owner=other_user, session_id="shared-name")
    assert theirs.id != "shared-name"

    communicator = socket("shared-name", other_cookie, last_event_id=cursor)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    [created] = await frames(communicator, 1)
    assert created["payload"]["session"]["id"] == "shared-name"
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()
