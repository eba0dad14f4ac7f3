"""The Redis mesh reader heals: bad frames are skipped, a lost Redis is waited out, and an
agent whose reader cannot run is taken off the registry so senders hear of it.

Each test runs its own redis-server (tests/servers.py, fixture `own_redis`) so it may kill it or change it.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis

from mesh.core import mount_mesh, unmount_mesh
from mesh.transports.redis_pubsub import RedisMeshTransport
from tests.core.support import calls
from tests.mesh.support import A, B, call_tool, eventually, items, make_agent

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

GOOD = {"id": "msg_good_1", "from": "x", "to": "a", "content": "still listening"}
BAD_FRAMES: list[bytes] = [
    b"\xff\xfe\xfd not UTF-8",
    b"not json",
    b"",
    b"42",
    b"null",
    b'"a string"',
    b"[1, 2, 3]",
    b"[" * 100_000,  # nesting deep enough to exhaust the parser's recursion
    json.dumps({"kind": "direct"}).encode(),
    json.dumps({"id": 7, "from": "x", "content": "id is a number"}).encode(),
    json.dumps({"id": "m", "from": "x", "content": ["not", "text"]}).encode(),
    json.dumps({"id": "m", "from": "x", "content": "hi", "kind": "shout"}).encode(),
    json.dumps({"id": "m", "from": "x", "content": "hi", "to": {"nested": True}}).encode(),
]


@pytest.fixture
async def raw(own_redis):
    client = aioredis.Redis.from_url(own_redis.url())
    yield client
    await client.aclose()


@pytest.fixture
async def transport(own_redis):
    transport = RedisMeshTransport(url=own_redis.url())
    yield transport
    await transport.close()


async def test_bad_frames_on_every_channel_are_counted_and_skipped(raw, transport):
    a, _, store_a = make_agent("a")
    adapter = transport.adapter("a")
    await mount_mesh(a, adapter=adapter, identity=A)
    await raw.hset("mesh:agents", "junk", b"\xff\xfe")  # a registry entry nobody can read
    await raw.hset("mesh:agents", "half", b'{"name": "no id"}')

    for channel in ("mesh:broadcast", "mesh:agent:a"):
        for frame in BAD_FRAMES:
            await raw.publish(channel, frame)
    await raw.publish("mesh:agent:a", json.dumps(GOOD))

    [item] = await eventually(lambda: items(store_a), timeout=15)
    assert item.response == "still listening"
    assert adapter.skipped_frames == 2 * len(BAD_FRAMES)
    listed = await call_tool(a, "glove_mesh_list_agents", {})
    assert [agent["id"] for agent in listed.data["agents"]] == []  # only a itself, hidden
    await unmount_mesh(a)


async def test_the_mesh_delivers_again_after_redis_is_killed_and_restarted(own_redis):
    transport = RedisMeshTransport(url=own_redis.url())
    send = calls(("glove_mesh_send_message", {"to": "b", "content": "after the outage"}))
    a, _, _ = make_agent("a", [send, "sent"])
    b, _, store_b = make_agent("b")
    await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    await mount_mesh(b, adapter=transport.adapter("b"), identity=B)

    own_redis.kill()
    await asyncio.sleep(2)  # the readers fail to reconnect a few times meanwhile
    own_redis.start()  # empty: no registry, no subscriptions

    raw = aioredis.Redis.from_url(own_redis.url(), decode_responses=True)
    await eventually(lambda: _registered(raw, {"a", "b"}), timeout=15)
    await eventually(lambda: _subscribers(raw, "mesh:agent:b"), timeout=15)
    await a.process_request("tell b")
    [incoming] = await eventually(lambda: items(store_b), timeout=15)
    assert incoming.response == "after the outage"
    await raw.aclose()
    await unmount_mesh(a)
    await unmount_mesh(b)
    await transport.close()


async def test_an_agent_whose_reader_cannot_run_is_unavailable_until_it_runs_again(raw, transport):
    a, _, _ = make_agent("a")
    b, _, store_b = make_agent("b")
    adapter_a = transport.adapter("a")
    await mount_mesh(a, adapter=adapter_a, identity=A)
    await mount_mesh(b, adapter=transport.adapter("b"), identity=B)

    # Redis up, but b may no longer subscribe (an ACL change): its reader is cut off and
    # cannot subscribe again.
    await raw.execute_command("ACL", "SETUSER", "default", "resetchannels")
    await raw.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    await eventually(lambda: _registered(raw, set()), timeout=15)
    # The sender hears of it instead of publishing into the void.
    sent = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "anyone?"})
    assert sent.status == "error"
    assert "No agent" in str(sent.message)

    await raw.execute_command("ACL", "SETUSER", "default", "allchannels")
    await eventually(lambda: _registered(raw, {"a", "b"}), timeout=15)
    await eventually(lambda: _subscribers(raw, "mesh:agent:b"), timeout=15)
    sent = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "back?"})
    assert sent.status == "success"
    [incoming] = await eventually(lambda: items(store_b), timeout=15)
    assert incoming.response == "back?"
    await unmount_mesh(a)
    await unmount_mesh(b)


async def _registered(raw, expected: set[str]) -> bool:
    keys = {
        key.decode() if isinstance(key, bytes) else key for key in await raw.hkeys("mesh:agents")
    }
    return keys - {"junk", "half"} == expected


async def _subscribers(raw, channel: str) -> int:
    [(_, count)] = await raw.pubsub_numsub(channel)
    return count
