"""Two agents in separate OS processes talk over a real transport with scripted models.

Agent a runs in the test's process. Agent b is a configured agent kept on the mesh by
`manage.py run_agent b --mesh-id b` in a process of its own, and its wake-up turns run in a
third process, `manage.py turn_worker`: the test proves it from the turn queue (the turn's
source and the worker that ran it), as the admin lists it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections

from gloveapp.turns.models import Turn
from mesh.core import mount_mesh, unmount_mesh
from tests.core.support import calls
from tests.mesh.support import A, B, eventually, items, make_agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
WORKER_ID = "mesh-test-worker"
WAIT = 60


def database_url_of_the_test_database() -> str:
    settings = connections["default"].settings_dict
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


class PeerProcesses:
    """`run_agent b --mesh-id b --max-turns 1` and a `turn_worker`, on the test database."""

    def __init__(self, **env: str) -> None:
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.mesh.peer_settings",
            "DATABASE_URL": database_url_of_the_test_database(),
            "GLOVE_TASKS_BACKEND": "db",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.peer: asyncio.subprocess.Process | None = None
        self.worker: asyncio.subprocess.Process | None = None

    async def _start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            *args,
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )

    async def start_peer(self) -> None:
        self.peer = await self._start("run_agent", "b", "--mesh-id", "b", "--max-turns", "1")
        assert await self.peer_says() == "b: on the mesh, waiting."

    async def start_worker(self) -> None:
        self.worker = await self._start("turn_worker", "--worker-id", WORKER_ID)

    async def peer_says(self) -> str:
        assert self.peer is not None
        line = await asyncio.wait_for(self.peer.stdout.readline(), WAIT)
        return line.decode().strip()

    async def close(self) -> None:
        for process in (self.peer, self.worker):
            if process is not None and process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 15)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def b_turns() -> list[tuple[str, str, str]]:
    return [
        turn
        async for turn in Turn.objects.filter(session_id="mesh:b").values_list(
            "source", "status", "worker_id"
        )
    ]


async def check_a_got_the_ack_and_the_reply(store_a, waiting) -> None:
    msg_id = waiting.tag.removeprefix("mesh:waiting:")
    resolved = await eventually(
        lambda: items(store_a, tag=waiting.tag, status="resolved"), timeout=WAIT
    )
    assert resolved[0].response == "ack from B"
    [answer] = await eventually(lambda: items(store_a, tag="mesh:from:b"), timeout=WAIT)
    assert answer.response == "reply from B"
    assert answer.request.startswith('Message from "Agent B" (b) [message id: msg_b_')
    assert answer.request.endswith(f"] (replying to {msg_id})")


@pytest.mark.process
@pytest.mark.redis
async def test_a_blocking_send_is_acked_and_answered_by_a_peer_whose_turn_runs_on_a_worker(
    redis_url, requires_postgres
):
    import redis.asyncio as aioredis

    from mesh.transports.redis_pubsub import RedisMeshTransport

    raw = aioredis.Redis.from_url(redis_url)
    await raw.flushdb()
    await raw.aclose()
    processes = PeerProcesses(MESH_TRANSPORT="redis", MESH_REDIS_URL=redis_url)
    transport = RedisMeshTransport(url=redis_url)
    try:
        await processes.start_worker()
        await processes.start_peer()  # pub/sub: b listens before a sends
        send = calls(
            ("glove_mesh_send_message", {"to": "b", "content": "hello B", "blocking": True})
        )
        a, _, store_a = make_agent("a", [send, "Waiting for B."])
        await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
        await a.process_request("Ask B and wait")
        [waiting] = await items(store_a, blocking=True)

        await check_a_got_the_ack_and_the_reply(store_a, waiting)
        assert await processes.peer_says() == "b: stopped after 1 turn(s)."
        assert await b_turns() == [("mesh", "done", WORKER_ID)]
        await unmount_mesh(a)
    finally:
        await processes.close()
        await transport.close()
        await sync_to_async(connections.close_all)()


@pytest.mark.process
async def test_a_message_waits_in_the_database_until_its_recipient_process_starts(
    requires_postgres,
):
    from mesh.transports.database import DatabaseMeshTransport, mesh_store

    transport = DatabaseMeshTransport(poll_interval=0.01)
    processes = PeerProcesses(MESH_TRANSPORT="database")
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
        [offline] = await items(mesh_store("b"))
        assert (offline.status, offline.response) == ("resolved", "hello B")

        await processes.start_peer()
        await processes.start_worker()
        await check_a_got_the_ack_and_the_reply(store_a, waiting)
        assert await processes.peer_says() == "b: stopped after 1 turn(s)."
        assert await b_turns() == [("mesh", "done", WORKER_ID)]
        [read] = await items(mesh_store("b"))
        assert read.status == "consumed"  # the worker's turn read it
        await unmount_mesh(a)
    finally:
        await processes.close()
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()
