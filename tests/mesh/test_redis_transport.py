"""The Redis transport speaks the seed's wire protocol, and survives a Redis restart.

The "TypeScript side" here is redis-py issuing exactly the commands the seed's
`RedisMeshAdapter` sketch issues (HSET/HGET on `mesh:agents`, SET ... EX on
`mesh:msg:<id>:sender`, PUBLISH on `mesh:agent:<id>` / `mesh:broadcast`).
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis

from mesh.transports.redis_pubsub import RedisMeshTransport
from tests.core.support import calls
from tests.mesh.support import A, B, call_tool, eventually, items, make_agent

pytestmark = pytest.mark.redis

TS_IDENTITY = {
    "id": "ts",
    "name": "TS Agent",
    "description": "speaks the sketch",
    "capabilities": ["chat"],
}


@pytest.fixture
async def raw(redis_url):
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture
async def ts_agent(raw):
    """A TypeScript-sketch peer: registered in the hash and listening on its channels."""
    await raw.hset("mesh:agents", "ts", json.dumps(TS_IDENTITY))
    pubsub = raw.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe("mesh:agent:ts", "mesh:broadcast")
    received: list[dict] = []

    async def listen():
        async for message in pubsub.listen():
            if message["type"] == "message":
                received.append(json.loads(message["data"]))

    task = asyncio.create_task(listen())
    yield received
    task.cancel()
    await pubsub.aclose()


@pytest.fixture
async def transport(redis_url):
    transport = RedisMeshTransport(url=redis_url)
    yield transport
    await transport.close()


async def test_a_python_agent_and_a_sketch_agent_talk_both_ways(raw, ts_agent, transport):
    from mesh.core import mount_mesh, unmount_mesh

    a, _, store_a = make_agent("a")
    await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    assert json.loads(await raw.hget("mesh:agents", "a")) == A.to_dict()

    listed = await call_tool(a, "glove_mesh_list_agents", {"filter": {"capability": "chat"}})
    assert [agent["id"] for agent in listed.data["agents"]] == ["ts"]

    # Python -> TS: a blocking direct message, in the sketch's body shape.
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "ts", "content": "hello TS", "blocking": True}
    )
    msg_id = sent.data["message_id"]
    [body] = await eventually(lambda: ts_agent)
    assert body == {
        "id": msg_id,
        "from": "a",
        "to": "ts",
        "content": "hello TS",
        "created_at": body["created_at"],
        "blocking": True,
        "kind": "direct",
    }
    assert await raw.get(f"mesh:msg:{msg_id}:sender") == "a"

    # TS -> Python: the sketch's acknowledge(): look the sender up, publish an ack.
    sender = await raw.get(f"mesh:msg:{msg_id}:sender")
    ack = {
        "id": "ack_1_abc",
        "from": "ts",
        "to": sender,
        "content": "on it",
        "created_at": "2026-01-01T00:00:00.000Z",
        "kind": "ack",
        "ack_of": msg_id,
        "ack_note": "on it",
    }
    await raw.publish(f"mesh:agent:{sender}", json.dumps(ack))
    [waiting] = await eventually(lambda: items(store_a, status="resolved"))
    assert waiting.response == "on it"

    # TS -> Python: a direct message and a broadcast, as the sketch's send()/broadcast() do.
    ts_msg = {
        "id": "msg_ts_1_x",
        "from": "ts",
        "to": "a",
        "content": "question from TS",
        "created_at": "2026-01-01T00:00:01.000Z",
        "kind": "direct",
    }
    await raw.set("mesh:msg:msg_ts_1_x:sender", "ts", ex=3600)
    await raw.publish("mesh:agent:a", json.dumps(ts_msg))
    await raw.publish(
        "mesh:broadcast",
        json.dumps({**ts_msg, "id": "msg_ts_2_y", "kind": "broadcast", "content": "to all"}),
    )
    await eventually(lambda: items(store_a, tag="mesh:broadcast:from:ts"))
    [direct] = await items(store_a, tag="mesh:from:ts")
    assert direct.response == "question from TS"
    assert direct.request == 'Message from "TS Agent" (ts) [message id: msg_ts_1_x]'

    # Python acks the TS message: routed through the sketch's sender key to the TS channel.
    await call_tool(a, "glove_mesh_acknowledge", {"message_id": "msg_ts_1_x", "note": "seen"})
    acks = await eventually(lambda: [m for m in ts_agent if m["kind"] == "ack"])
    assert acks[0]["ack_of"] == "msg_ts_1_x" and acks[0]["to"] == "ts"
    assert acks[0]["ack_note"] == "seen" and acks[0]["content"] == "seen"

    await unmount_mesh(a)
    assert await raw.hget("mesh:agents", "a") is None


async def test_a_malformed_body_on_the_channel_is_ignored(raw, transport):
    from mesh.core import mount_mesh, unmount_mesh

    a, _, store_a = make_agent("a")
    await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    await raw.publish("mesh:agent:a", "not json")
    await raw.publish("mesh:agent:a", json.dumps({"kind": "direct"}))
    # A direct frame is admitted only by the agent its `to` names (issue 22).
    await raw.publish("mesh:agent:a", json.dumps({"id": "m0", "from": "x", "content": "no to"}))
    await raw.publish(
        "mesh:agent:a", json.dumps({"id": "m1", "from": "x", "to": "a", "content": "fine"})
    )
    [item] = await eventually(lambda: items(store_a))
    assert item.response == "fine"
    await unmount_mesh(a)


@pytest.mark.process
async def test_agents_reconnect_resubscribe_and_reregister_after_redis_restarts(own_redis):
    from mesh.core import mount_mesh, unmount_mesh

    url = own_redis.url()
    transport = RedisMeshTransport(url=url)
    send = calls(
        ("glove_mesh_send_message", {"to": "b", "content": "after restart", "blocking": True})
    )
    a, _, store_a = make_agent("a", [send, "sent"])
    b, _, store_b = make_agent("b")
    await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    await mount_mesh(b, adapter=transport.adapter("b"), identity=B)

    own_redis.restart()  # an empty Redis: no registry, no subscriptions

    raw = aioredis.Redis.from_url(url, decode_responses=True)
    await eventually(lambda: raw.hlen("mesh:agents"), timeout=15)
    await eventually(lambda: _both_registered(raw), timeout=15)
    await eventually(lambda: _subscribers(raw, "mesh:agent:b"), timeout=15)
    await eventually(lambda: _subscribers(raw, "mesh:agent:a"), timeout=15)
    await a.process_request("tell b")
    [incoming] = await eventually(lambda: items(store_b), timeout=15)
    assert incoming.response == "after restart"
    msg_id = incoming.request.split("[message id: ")[1].rstrip("]")
    await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id})
    await eventually(lambda: items(store_a, status="resolved"), timeout=15)
    await raw.aclose()
    await unmount_mesh(a)
    await unmount_mesh(b)
    await transport.close()


async def _both_registered(raw) -> bool:
    return set(await raw.hkeys("mesh:agents")) == {"a", "b"}


async def _subscribers(raw, channel: str) -> int:
    [(_, count)] = await raw.pubsub_numsub(channel)
    return count
