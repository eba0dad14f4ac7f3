"""Stored events go from this process's relay to its own sockets directly (not through the
channel layer): held back while a socket replays, and dropped when it goes away."""

from __future__ import annotations

import time

import pytest

from gloveapp.live import consumers
from gloveapp.live import relay as relay_module
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, commit_event, frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def _wait_until_relayed(event_id: int) -> None:
    deadline = time.monotonic() + FRAME_TIMEOUT
    while relay_module._relay.high_water < event_id:
        assert time.monotonic() < deadline, "the relay never reached the event"
        time.sleep(0.01)


@pytest.mark.parametrize("replay_sees_it", [False, True])
async def test_it_holds_an_event_relayed_during_the_replay_until_the_replay_is_out(
    layer, chat, owner_cookie, monkeypatch, replay_sees_it
):
    # The relay hands the socket an event while its replay is still being read: it must go
    # out after the replay (order), and once even when the replay read it too.
    before = await acommit_event(chat.id, title="before")
    during: list[int] = []
    replay_after = consumers.replay_after

    def replay_with_a_commit_meanwhile(stream, last_event_id):
        if not replay_sees_it:
            replay = replay_after(stream, last_event_id)
        during.append(commit_event(chat.id, title="during"))
        _wait_until_relayed(during[0])
        return replay if not replay_sees_it else replay_after(stream, last_event_id)

    monkeypatch.setattr(consumers, "replay_after", replay_with_a_commit_meanwhile)
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=before - 1)

    assert [frame["id"] for frame in await frames(communicator, 2)] == [before, *during]
    after = await acommit_event(chat.id, title="after")  # and then it is live
    assert [frame["id"] for frame in await frames(communicator, 1)] == [after]
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_it_forgets_a_socket_once_it_disconnects(layer, chat, owner_cookie):
    communicator = await open_socket(chat.id, owner_cookie)
    assert len(relay_module._relay.watchers[f"session:{chat.id}"]) == 1

    await communicator.disconnect()

    assert relay_module._relay.watchers == {}
