"""The database transport's own promises: durable, atomic, at most once per recipient."""

from __future__ import annotations

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections

from gloveapp.live.models import LiveEvent
from mesh.core import MeshMessage, mount_mesh, new_message_id, unmount_mesh
from mesh.core.peer import serve_mesh_peer
from mesh.models import MeshDelivery
from mesh.transports.database import DatabaseMeshTransport, mesh_store
from tests.core.support import calls
from tests.mesh.support import A, B, C, call_tool, eventually, items, make_agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def transport():
    yield DatabaseMeshTransport(poll_interval=0.01)
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


async def test_an_offline_agent_finds_its_messages_when_it_comes_back_and_answers(transport):
    await transport.adapter("b").register(B)  # b was here before; it is not running now
    a, _, store_a = make_agent("a", store=mesh_store("a"))
    await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "while you were out", "blocking": True}
    )
    msg_id = sent.data["message_id"]

    def ack(prompt):
        return calls(("glove_mesh_acknowledge", {"message_id": msg_id, "note": "back now"}))

    b, model_b, _ = make_agent("b", [ack, "ok"], store=mesh_store("b"))
    mount = await mount_mesh(b, adapter=transport.adapter("b"), identity=B)
    assert await serve_mesh_peer(mount, max_turns=1) == 1  # woken at once: mail was waiting
    assert "while you were out" in model_b.calls[0].messages[0].text
    [resolved] = await eventually(lambda: items(store_a, status="resolved"))
    assert resolved.response == "back now"
    await unmount_mesh(a)
    await unmount_mesh(b)


async def test_a_retried_send_is_delivered_at_most_once(transport):
    sender = transport.adapter("a")
    await sender.register(A)
    await transport.adapter("b").register(B)
    message_id = new_message_id("a")
    for _ in range(3):
        await sender.send(MeshMessage(id=message_id, from_="a", to="b", content="once"))
    assert [i.response for i in await items(mesh_store("b"))] == ["once"]
    assert await MeshDelivery.objects.filter(message_id=message_id).acount() == 1


async def test_a_send_retried_across_midnight_is_still_delivered_once_by_its_first_sender(
    transport,
):
    """On PostgreSQL the sender and delivery records are partitioned by day, each day's
    unique index seeing that day only: the first send's rows of 23:59:59 sit in yesterday's
    partition, and the retry's lookup under the key's lock still finds them."""
    from datetime import timedelta

    from django.utils import timezone

    from gloveapp.lib.db.partitions import day_start
    from mesh.models import MeshSentMessage
    from mesh.services import mesh_sender_of

    sender = transport.adapter("a")
    await sender.register(A)
    await transport.adapter("b").register(B)
    await transport.adapter("c").register(C)
    message_id = new_message_id("a")
    await sender.send(MeshMessage(id=message_id, from_="a", to="b", content="once"))
    before_midnight = day_start(timezone.now()) - timedelta(seconds=1)
    await MeshDelivery.objects.filter(message_id=message_id).aupdate(delivered_at=before_midnight)
    await MeshSentMessage.objects.filter(message_id=message_id).aupdate(created_at=before_midnight)

    await sender.send(MeshMessage(id=message_id, from_="a", to="b", content="once"))
    await transport.adapter("c").send(MeshMessage(id=message_id, from_="c", to="b", content="x"))

    assert [i.response for i in await items(mesh_store("b"))] == ["once"]
    assert await MeshDelivery.objects.filter(message_id=message_id).acount() == 1
    assert await MeshSentMessage.objects.filter(message_id=message_id).acount() == 1
    assert await sync_to_async(mesh_sender_of)(message_id) == "a"


async def test_the_inbox_item_delivery_row_and_live_event_commit_together(transport, monkeypatch):
    sender = transport.adapter("a")
    await sender.register(A)
    await transport.adapter("b").register(B)
    await sender.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="fine"))
    event = await LiveEvent.objects.filter(stream="mesh:b").alast()
    assert event.type == "mesh.delivered"
    assert event.payload["message"]["content"] == "fine"

    def broken_event(**kwargs):
        raise RuntimeError("event log unavailable")

    monkeypatch.setattr("mesh.services.record_events", broken_event)
    with pytest.raises(RuntimeError, match="event log unavailable"):
        await sender.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="lost?"))
    assert [i.response for i in await items(mesh_store("b"))] == ["fine"]
    assert await MeshDelivery.objects.acount() == 1


async def test_sends_made_at_once_share_transactions_and_each_is_delivered_once(transport):
    import asyncio

    from mesh.core import MeshUnknownAgentError

    await transport.adapter("b").register(B)
    await transport.adapter("c").register(C)
    senders = [transport.adapter(f"a{index}") for index in range(20)]
    retried = new_message_id("a0")
    sends = [
        MeshMessage(id=new_message_id(f"a{index}"), from_="", to="b", content=f"m{index}")
        for index in range(20)
    ]
    sends.append(MeshMessage(id=retried, from_="", to="c", content="once"))
    sends.append(MeshMessage(id=retried, from_="", to="c", content="once"))  # same batch
    nobody = MeshMessage(id=new_message_id("a1"), from_="", to="nobody", content="lost")
    outcomes = await asyncio.gather(
        *[senders[index % 20].send(message) for index, message in enumerate(sends)],
        senders[1].send(nobody),
        return_exceptions=True,
    )
    assert outcomes[:-1] == [None] * len(sends)
    assert isinstance(outcomes[-1], MeshUnknownAgentError)  # fails alone
    assert sorted(i.response for i in await items(mesh_store("b"))) == sorted(
        f"m{index}" for index in range(20)
    )
    assert [i.response for i in await items(mesh_store("c"))] == ["once"]
    assert await MeshDelivery.objects.acount() == 21
    assert await LiveEvent.objects.filter(stream="mesh:b", type="mesh.delivered").acount() == 20


async def test_an_agent_must_use_its_mesh_inbox_as_its_store(transport):
    from gloveapp.core import MemoryStore

    a, _, _ = make_agent("a", store=MemoryStore("a"))
    with pytest.raises(ValueError, match='must use the store of session "mesh:a"'):
        await mount_mesh(a, adapter=transport.adapter("a"), identity=A)


async def test_a_clean_shutdown_can_keep_the_agent_registered_for_later_delivery(transport):
    b, _, _ = make_agent("b", store=mesh_store("b"))
    await mount_mesh(b, adapter=transport.adapter("b"), identity=B)
    await unmount_mesh(b, unregister=False)
    assert [agent.id for agent in await transport.adapter("a").list_agents()] == ["b"]


def test_signing_keys_are_refused_by_the_database_transport():
    with pytest.raises(ValueError, match="does not apply to the database transport"):
        DatabaseMeshTransport(signing_keys={"a": "k"})


async def test_messages_are_stored_for_the_admin_with_sender_and_recipient(transport):
    sender = transport.adapter("a")
    await sender.register(A)
    await transport.adapter("b").register(B)
    await sender.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="hi"))
    delivery = await sync_to_async(MeshDelivery.objects.select_related("inbox_item").get)()
    assert (delivery.sender, delivery.recipient, delivery.kind) == ("a", "b", "direct")
    assert delivery.inbox_item.session_id == "mesh:b"
