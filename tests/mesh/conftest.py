"""Every mesh contract test runs over each transport: in-process and Redis (and the database
transport where it exists). A transport fixture hands out adapters and cleans up after."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections

from gloveapp.core import MemoryStore
from mesh.core import unmount_mesh
from mesh.transports.inprocess import InProcessMeshTransport
from tests.mesh.support import make_agent

TRANSPORTS = [
    pytest.param("inprocess", id="inprocess"),
    pytest.param("redis", id="redis", marks=[pytest.mark.redis]),
    pytest.param(
        "database",
        id="database",
        marks=[pytest.mark.postgres, pytest.mark.django_db(transaction=True)],
    ),
]
# Signed messages only mean something where the recipient's side reads the wire.
SIGNING_TRANSPORTS = TRANSPORTS[:2]


class Harness:
    """One transport under test plus the agents a test mounted on it."""

    def __init__(self, kind: str, factory: Any) -> None:
        self.kind = kind
        self._factory = factory
        self.transport = factory()
        self._mounted: list[Any] = []
        self._unsubscribes: list[Any] = []
        self._extra: list[Any] = []
        self._memory_stores: dict[str, Any] = {}

    def adapter(self, agent_id: str) -> Any:
        return self.transport.adapter(agent_id)

    def store(self, agent_id: str) -> Any:
        """A fresh handle on the agent's inbox store (the same data for the same id)."""
        if self.kind == "database":
            from mesh.transports.database import mesh_store

            return mesh_store(agent_id)
        # In memory, "the same data" is the same object (it outlives a restarted Glove).
        return self._memory_stores.setdefault(agent_id, MemoryStore(agent_id))

    def agent(self, agent_id: str, script: list[Any] | None = None, *, store: Any = None):
        return make_agent(
            agent_id, script, store=store if store is not None else self.store(agent_id)
        )

    def new_transport(self, **config: Any) -> Any:
        transport = self._factory(**config)
        self._extra.append(transport)
        return transport

    async def subscribe(self, adapter: Any, handler: Any) -> None:
        self._unsubscribes.append(await adapter.subscribe(handler))

    async def mount(self, glove: Any, identity: Any, adapter: Any = None) -> Any:
        from mesh.core import mount_mesh

        self._mounted.append(glove)
        return await mount_mesh(
            glove, adapter=adapter or self.adapter(identity.id), identity=identity
        )

    async def close(self) -> None:
        for glove in self._mounted:
            await unmount_mesh(glove)
        for unsubscribe in self._unsubscribes:
            await unsubscribe()
        for transport in [self.transport, *self._extra]:
            await transport.close()


def _redis_factory(redis_url: str):
    from mesh.transports.redis_pubsub import RedisMeshTransport

    def factory(**config: Any) -> Any:
        return RedisMeshTransport(url=redis_url, **config)

    return factory


async def _harness(request) -> Any:
    if request.param == "inprocess":
        return Harness("inprocess", InProcessMeshTransport)
    if request.param == "database":
        from mesh.transports.database import DatabaseMeshTransport

        request.addfinalizer(
            lambda: SyncToAsync.single_thread_executor.submit(connections.close_all).result()
        )
        return Harness(
            "database", lambda **config: DatabaseMeshTransport(poll_interval=0.01, **config)
        )
    if True:
        import redis.asyncio as aioredis

        redis_url = request.getfixturevalue("redis_url")
        client = aioredis.Redis.from_url(redis_url)
        await client.flushdb()  # our own test db (TEST_REDIS_URL); the mesh keys live there
        await client.aclose()
        return Harness("redis", _redis_factory(redis_url))


@pytest.fixture(params=TRANSPORTS)
async def mesh(request) -> Any:
    harness = await _harness(request)
    yield harness
    await harness.close()


@pytest.fixture(params=SIGNING_TRANSPORTS)
async def signing_mesh(request) -> Any:
    harness = await _harness(request)
    yield harness
    await harness.close()
