"""The adapter half of the conformance checklist (contract §9.7, cases 1-11), per transport."""

from __future__ import annotations

import pytest

from mesh.core import (
    AgentIdentity,
    MeshMessage,
    MeshNetwork,
    MeshUnknownAgentError,
    MeshUnknownMessageError,
    new_message_id,
)
from tests.mesh.support import A, B, C, Recorder, eventually, quiet_period


def message(to: str | None, content: str = "hello", sender: str = "a") -> MeshMessage:
    return MeshMessage(id=new_message_id(sender), from_=sender, to=to, content=content)


async def registered(mesh, *identities: AgentIdentity) -> list:
    adapters = []
    for identity in identities:
        adapter = mesh.adapter(identity.id)
        await adapter.register(identity)
        adapters.append(adapter)
    return adapters


async def test_it_lists_registers_and_unregisters_agents(mesh):  # case 1
    a, _b = await registered(mesh, A, B)
    assert sorted(agent.id for agent in await a.list_agents()) == ["a", "b"]
    assert await a.get_agent("a") == A
    await a.unregister()
    assert [agent.id for agent in await a.list_agents()] == ["b"]
    assert await a.get_agent("a") is None


async def test_it_delivers_a_direct_message_to_the_recipients_handler(mesh):  # case 2
    a, b = await registered(mesh, A, B)
    inbox = Recorder()
    await mesh.subscribe(b, inbox)
    await a.send(message("b", "hi b"))
    [got] = await eventually(lambda: inbox.received)
    assert (got.kind, got.from_, got.to, got.content) == ("direct", "a", "b", "hi b")


async def test_it_does_not_deliver_a_direct_message_to_the_sender(mesh):  # case 3
    a, b = await registered(mesh, A, B)
    mine, theirs = Recorder(), Recorder()
    await mesh.subscribe(a, mine)
    await mesh.subscribe(b, theirs)
    await a.send(message("b"))
    await eventually(lambda: theirs.received)
    await quiet_period()
    assert mine.received == []


async def test_it_broadcasts_to_every_other_agent_once(mesh):  # case 4
    a, b, c = await registered(mesh, A, B, C)
    seen = {agent_id: Recorder() for agent_id in "abc"}
    for agent_id, adapter in zip("abc", (a, b, c), strict=True):
        await mesh.subscribe(adapter, seen[agent_id])
    await a.broadcast(MeshMessage(id=new_message_id("a"), from_="a", content="all hands"))
    await eventually(lambda: seen["b"].received and seen["c"].received)
    await quiet_period()
    assert [m.kind for m in seen["b"].received] == ["broadcast"]
    assert [m.kind for m in seen["c"].received] == ["broadcast"]
    assert seen["a"].received == []


async def test_it_routes_an_acknowledgement_back_to_the_original_sender(mesh):  # case 5
    a, b = await registered(mesh, A, B)
    sender_inbox = Recorder()
    await mesh.subscribe(a, sender_inbox)
    sent = message("b")
    await a.send(sent)
    await b.acknowledge(sent.id, "got it")
    [ack] = await eventually(lambda: sender_inbox.received)
    assert (ack.kind, ack.ack_of, ack.ack_note, ack.from_) == ("ack", sent.id, "got it", "b")


async def test_it_refuses_to_acknowledge_an_unknown_message(mesh):  # case 6
    _a, b = await registered(mesh, A, B)
    with pytest.raises(MeshUnknownMessageError, match=r'No record of message "msg_nope"\.'):
        await b.acknowledge("msg_nope")


async def test_a_throwing_handler_does_not_stop_the_next_handler(mesh):  # case 7
    a, b = await registered(mesh, A, B)

    async def explode(_message):
        raise RuntimeError("boom")

    survivor = Recorder()
    await mesh.subscribe(b, explode)
    await mesh.subscribe(b, survivor)
    await a.send(message("b"))
    await eventually(lambda: survivor.received)


async def test_it_refuses_to_send_to_an_unregistered_agent(mesh):  # case 8
    (a,) = await registered(mesh, A)
    with pytest.raises(MeshUnknownAgentError, match=r'No agent with id "nobody"\.'):
        await a.send(message("nobody"))


async def test_it_refuses_a_direct_message_without_a_recipient(mesh):  # case 9
    (a,) = await registered(mesh, A)
    with pytest.raises(MeshUnknownAgentError, match=r'No agent with id "\(missing `to` field\)".'):
        await a.send(message(None))


async def test_a_broadcast_skips_registered_agents_that_never_subscribed(mesh):  # case 10
    a, _b, c = await registered(mesh, A, B, C)
    listener = Recorder()
    await mesh.subscribe(c, listener)
    await a.broadcast(MeshMessage(id=new_message_id("a"), from_="a", content="anyone?"))
    await eventually(lambda: listener.received)


async def test_the_in_process_sender_table_forgets_the_oldest_ids_beyond_its_capacity():  # 11
    network = MeshNetwork(sender_table_capacity=3)
    network.register_agent(A)
    network.register_agent(B)
    ids = []
    for _ in range(5):
        sent = message("b")
        await network.deliver_direct(sent)
        ids.append(sent.id)
    assert [network.lookup_sender(i) for i in ids] == [None, None, "a", "a", "a"]


async def test_the_redis_sender_table_entries_expire_after_their_ttl(redis_url):  # 11, Redis
    import redis.asyncio as aioredis

    from mesh.transports.redis_pubsub import RedisMeshTransport, sender_key

    transport = RedisMeshTransport(url=redis_url, sender_ttl=90)
    a = transport.adapter("a")
    await a.register(A)
    await transport.adapter("b").register(B)
    sent = message("b")
    await a.send(sent)
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    assert await raw.get(sender_key(sent.id)) == "a"
    assert 0 < await raw.ttl(sender_key(sent.id)) <= 90
    await raw.aclose()
    await transport.close()
