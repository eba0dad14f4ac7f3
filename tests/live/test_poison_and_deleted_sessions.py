"""One event the channel layer cannot send is skipped, and a deleted session's sockets close.

A poison row must not stop live updates for everybody else in the process; a socket is
authorised only when it connects, so it must not outlive its session (whose id a new owner
could otherwise take over).
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from gloveapp.conversations import services
from gloveapp.conversations.models import Session
from gloveapp.core.types import Message
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, frames, open_socket, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _refuse_poison(monkeypatch) -> list[int]:
    """Make the channel layer refuse any event whose payload says `poison`, as msgpack
    refuses a value it cannot encode; returns the ids it refused, one entry per attempt."""
    layer = get_channel_layer()
    send = layer.group_send
    refused: list[int] = []

    async def group_send(group, message):
        if message.get("payload", {}).get("poison"):
            refused.append(message["id"])
            raise TypeError("can not serialize this payload")
        await send(group, message)

    monkeypatch.setattr(layer, "group_send", group_send)
    return refused


async def test_it_skips_an_event_the_layer_cannot_send_and_relays_the_next(
    layer, chat, other_chat, owner_cookie, other_cookie, monkeypatch, caplog
):
    mine = await open_socket(chat.id, owner_cookie)
    theirs = await open_socket(other_chat.id, other_cookie)
    refused = _refuse_poison(monkeypatch)

    poison = await acommit_event(chat.id, "message.appended", poison=True)
    after = await acommit_event(chat.id, "message.appended", seq=1)
    elsewhere = await acommit_event(other_chat.id, "message.appended", seq=2)

    assert [frame["id"] for frame in await frames(mine, 1)] == [after]
    assert [frame["id"] for frame in await frames(theirs, 1)] == [elsewhere]
    assert refused == [poison, poison, poison]  # a few attempts, then skipped for good
    assert any(f"skipped event {poison}" in record.getMessage() for record in caplog.records)
    await mine.disconnect()
    await theirs.disconnect()


async def test_it_skips_a_payload_redis_cannot_encode(layer, chat, owner_cookie):
    # A real poison row for channels_redis: msgpack has no encoding for integers beyond
    # 64 bits (the in-memory layer passes it on unchanged; JSON and the socket can hold it).
    communicator = await open_socket(chat.id, owner_cookie)
    huge = await acommit_event(chat.id, "message.appended", n=2**70)
    after = await acommit_event(chat.id, "message.appended", seq=1)

    received = [frame["id"] for frame in await frames(communicator, 2 if layer == "memory" else 1)]

    assert received == ([huge, after] if layer == "memory" else [after])
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
    create = database_sync_to_async(services.session_create)
    session = await create(owner=owner, session_id="shared-name")
    await database_sync_to_async(services.messages_append)(
        session_id="shared-name",
        messages=[Message(sender="user", text="my card ends 4242")],
    )
    await database_sync_to_async(services.session_delete)(session=session)

    with pytest.raises(services.DuplicateSession):
        await create(owner=other_user, session_id="shared-name")

    # With no session under that id, a socket replaying from the start is refused at once.
    communicator = socket("shared-name", other_cookie, last_event_id=0)
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    assert await communicator.receive_output(timeout=FRAME_TIMEOUT) == {
        "type": "websocket.close",
        "code": 4404,
    }
    await communicator.disconnect()
