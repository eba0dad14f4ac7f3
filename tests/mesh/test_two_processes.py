"""Two agents in two OS processes talk over a real transport with scripted models."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from mesh.core import mount_mesh, unmount_mesh
from tests.core.support import calls
from tests.mesh.support import A, eventually, items, make_agent

ROOT = Path(__file__).resolve().parents[2]


async def start_peer(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mesh.peer_process",
        *args,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.redis
async def test_a_blocking_send_is_acked_and_answered_by_an_agent_in_another_process(redis_url):
    import redis.asyncio as aioredis

    from mesh.transports.redis_pubsub import RedisMeshTransport

    raw = aioredis.Redis.from_url(redis_url)
    await raw.flushdb()
    await raw.aclose()
    peer = await start_peer("redis", redis_url)
    try:
        assert (await asyncio.wait_for(peer.stdout.readline(), 30)).strip() == b"ready"
        transport = RedisMeshTransport(url=redis_url)
        send = calls(
            ("glove_mesh_send_message", {"to": "b", "content": "hello B", "blocking": True})
        )
        a, _, store_a = make_agent("a", [send, "Waiting for B."])
        await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
        await a.process_request("Ask B and wait")
        [waiting] = await items(store_a, blocking=True)
        msg_id = waiting.tag.removeprefix("mesh:waiting:")

        resolved = await eventually(
            lambda: items(store_a, tag=waiting.tag, status="resolved"), timeout=30
        )
        assert resolved[0].response == "ack from B"
        [answer] = await eventually(lambda: items(store_a, tag="mesh:from:b"), timeout=30)
        assert answer.response == "reply from B"
        assert answer.request.startswith('Message from "Agent B" (b) [message id: msg_b_')
        assert answer.request.endswith(f"] (replying to {msg_id})")
        assert (await asyncio.wait_for(peer.stdout.readline(), 30)).strip() == b"done 3"
        peer.stdin.close()
        assert await asyncio.wait_for(peer.wait(), 30) == 0
        await unmount_mesh(a)
        await transport.close()
    finally:
        if peer.returncode is None:
            peer.kill()
        await peer.wait()


def database_url_of_the_test_database() -> str:
    from django.db import connection

    settings = connection.settings_dict
    if settings["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{settings['NAME']}"
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_a_message_waits_in_the_database_until_its_recipient_process_starts(monkeypatch):
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from mesh.transports.database import DatabaseMeshTransport, mesh_store
    from tests.mesh.support import B

    transport = DatabaseMeshTransport(poll_interval=0.01)
    try:
        # b ran before and is registered, but no process of b is running now.
        await transport.adapter("b").register(B)
        send = calls(
            ("glove_mesh_send_message", {"to": "b", "content": "hello B", "blocking": True})
        )
        a, _, store_a = make_agent("a", [send, "Waiting for B."], store=mesh_store("a"))
        await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
        await a.process_request("Ask B and wait")
        [waiting] = await items(store_a, blocking=True)
        msg_id = waiting.tag.removeprefix("mesh:waiting:")
        [offline] = await items(mesh_store("b"))
        assert (offline.status, offline.response) == ("resolved", "hello B")

        monkeypatch.setenv("DATABASE_URL", database_url_of_the_test_database())
        peer = await start_peer("database", "-")
        try:
            assert (await asyncio.wait_for(peer.stdout.readline(), 60)).strip() == b"ready"
            resolved = await eventually(
                lambda: items(store_a, tag=waiting.tag, status="resolved"), timeout=60
            )
            assert resolved[0].response == "ack from B"
            [answer] = await eventually(lambda: items(store_a, tag="mesh:from:b"), timeout=60)
            assert answer.response == "reply from B"
            assert answer.request.endswith(f"] (replying to {msg_id})")
            assert (await asyncio.wait_for(peer.stdout.readline(), 60)).strip() == b"done 3"
            peer.stdin.close()
            assert await asyncio.wait_for(peer.wait(), 60) == 0
        finally:
            if peer.returncode is None:
                peer.kill()
            await peer.wait()
        await unmount_mesh(a)
    finally:
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()
