"""Every mesh contract test runs over each transport: in-process and Redis (and the database
transport where it exists). A transport fixture hands out adapters and cleans up after."""

from __future__ import annotations

from typing import Any

import pytest

from mesh.core import unmount_mesh
from mesh.transports.inprocess import InProcessMeshTransport

TRANSPORTS = ["inprocess", "redis"]


class Harness:
    """One transport under test plus the agents a test mounted on it."""

    def __init__(self, kind: str, factory: Any) -> None:
        self.kind = kind
        self._factory = factory
        self.transport = factory()
        self._mounted: list[Any] = []
        self._unsubscribes: list[Any] = []
        self._extra: list[Any] = []

    def adapter(self, agent_id: str) -> Any:
        return self.transport.adapter(agent_id)

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


@pytest.fixture(params=TRANSPORTS)
async def mesh(request) -> Any:
    if request.param == "inprocess":
        harness = Harness("inprocess", InProcessMeshTransport)
    else:
        import redis.asyncio as aioredis

        redis_url = request.getfixturevalue("redis_url")
        client = aioredis.Redis.from_url(redis_url)
        await client.flushdb()  # our own test db (TEST_REDIS_URL); the mesh keys live there
        await client.aclose()
        harness = Harness("redis", _redis_factory(redis_url))
    yield harness
    await harness.close()
