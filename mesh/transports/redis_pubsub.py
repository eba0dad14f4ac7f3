"""The Redis transport, wire-compatible with the seed's TypeScript `RedisMeshAdapter`.

Key layout (exactly the seed's):
- `mesh:agents`            hash, agent id -> identity JSON
- `mesh:agent:<id>`        pub/sub channel of one agent (direct messages and acks)
- `mesh:broadcast`         pub/sub channel every agent listens on
- `mesh:msg:<id>:sender`   string, who sent message <id> (for routing acks), with a TTL

Bodies are the JSON of `IncomingMeshMessage.to_dict()` (the message plus `kind`), so a
TypeScript agent and ours talk both ways. Additions that stay compatible: a direct send to an
agent missing from `mesh:agents` fails with `MeshUnknownAgentError` (the sketch publishes
into the void), a receiver ignores its own broadcasts, signed messages carry `signature`.

Pub/sub is fire-and-forget: an agent that is not subscribed when a message is published never
sees it (the database transport is the durable one). After Redis restarts, each subscriber
reconnects, resubscribes and registers its identity again (a restarted Redis without
persistence has forgotten `mesh:agents`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mesh.core.adapter import MeshHandler, Unsubscribe
from mesh.core.errors import MeshAccessDeniedError, MeshUnknownAgentError, MeshUnknownMessageError
from mesh.core.security import DEFAULT_MAX_AGE, MeshGuard
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, build_ack

logger = logging.getLogger("mesh")

AGENTS_KEY = "mesh:agents"
BROADCAST_CHANNEL = "mesh:broadcast"
DEFAULT_SENDER_TTL = 3600
RECEIVED_MEMORY = 4096


def agent_channel(agent_id: str) -> str:
    return f"mesh:agent:{agent_id}"


def sender_key(message_id: str) -> str:
    return f"mesh:msg:{message_id}:sender"


# One round trip for a direct send: record the sender (first, as glove-mesh does, even if the
# send then fails), refuse unknown recipients, publish.
SEND_SCRIPT = """
redis.call('SET', KEYS[2], ARGV[2], 'EX', tonumber(ARGV[3]))
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
return redis.call('PUBLISH', KEYS[3], ARGV[4])
"""


def make_client(url: str) -> aioredis.Redis:
    # Commands retry over a short backoff so a send during a Redis restart waits it out.
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=8),
        retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionError, OSError],
    )


def make_subscriber_client(url: str) -> aioredis.Redis:
    # No silent retries here: redis-py would resubscribe quietly, and the adapter must know
    # Redis came back so it can register its identity again.
    return aioredis.Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0))


class RedisMeshAdapter:
    def __init__(
        self,
        agent_id: str,
        *,
        client: aioredis.Redis,
        subscriber_client: aioredis.Redis | None = None,
        guard: MeshGuard | None = None,
        sender_ttl: int = DEFAULT_SENDER_TTL,
        reconnect_delay: float = 0.1,
    ) -> None:
        self.agent_id = agent_id
        self.identifier = f"redis-mesh-{agent_id}"
        self.client = client
        self.subscriber_client = subscriber_client or client
        self.guard = guard or MeshGuard()
        self.sender_ttl = sender_ttl
        self.reconnect_delay = reconnect_delay
        self._identity: AgentIdentity | None = None
        # Senders of the messages this agent received (bounded): acknowledging one of them
        # then needs no GET of `mesh:msg:<id>:sender` first.
        self._received_from: OrderedDict[str, str] = OrderedDict()
        self._send_script = client.register_script(SEND_SCRIPT)

    # -- registry ------------------------------------------------------------------------------
    async def register(self, identity: AgentIdentity) -> None:
        self._identity = identity
        await self.client.hset(AGENTS_KEY, self.agent_id, json.dumps(identity.to_dict()))

    async def unregister(self) -> None:
        self._identity = None
        await self.client.hdel(AGENTS_KEY, self.agent_id)

    async def list_agents(self) -> list[AgentIdentity]:
        raw = await self.client.hgetall(AGENTS_KEY)
        agents = []
        for value in raw.values():
            identity = _parse_identity(value)
            if identity is not None:
                agents.append(identity)
        return agents

    async def get_agent(self, agent_id: str) -> AgentIdentity | None:
        value = await self.client.hget(AGENTS_KEY, agent_id)
        return _parse_identity(value) if value is not None else None

    # -- outbound ------------------------------------------------------------------------------
    async def send(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        if not message.to:
            raise MeshUnknownAgentError("(missing `to` field)")
        if not self.guard.may_message(self.agent_id, message.to):
            raise MeshAccessDeniedError(self.agent_id, message.to)
        wire = self.guard.sign(IncomingMeshMessage.from_message(message, "direct").to_dict())
        result = await self._send_script(
            keys=[AGENTS_KEY, sender_key(message.id), agent_channel(message.to)],
            args=[message.to, self.agent_id, self.sender_ttl, json.dumps(wire)],
        )
        if int(result) < 0:
            raise MeshUnknownAgentError(message.to)

    async def broadcast(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        message.to = None
        wire = self.guard.sign(IncomingMeshMessage.from_message(message, "broadcast").to_dict())
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.set(sender_key(message.id), self.agent_id, ex=self.sender_ttl)
            pipe.publish(BROADCAST_CHANNEL, json.dumps(wire))
            await pipe.execute()

    async def acknowledge(self, message_id: str, note: str | None = None) -> None:
        sender = self._received_from.get(message_id) or await self.client.get(
            sender_key(message_id)
        )
        if not sender:
            raise MeshUnknownMessageError(message_id)
        if not self.guard.may_message(self.agent_id, sender):
            raise MeshAccessDeniedError(self.agent_id, sender)
        ack = build_ack(original_sender=sender, ack_of=message_id, sender=self.agent_id, note=note)
        await self.client.publish(agent_channel(sender), json.dumps(self.guard.sign(ack.to_dict())))

    # -- inbound -------------------------------------------------------------------------------
    async def subscribe(self, handler: MeshHandler) -> Unsubscribe:
        pubsub = await self._open_subscription()
        task = asyncio.create_task(self._read(pubsub, handler), name=f"mesh-redis-{self.agent_id}")

        async def unsubscribe() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

        return unsubscribe

    async def _open_subscription(self) -> Any:
        pubsub = self.subscriber_client.pubsub(ignore_subscribe_messages=True)
        # Returns once Redis confirmed the subscription: nothing published after mount is missed.
        await pubsub.subscribe(agent_channel(self.agent_id), BROADCAST_CHANNEL)
        await pubsub.get_message(timeout=0)  # consume the confirmations
        return pubsub

    async def _read(self, pubsub: Any, handler: MeshHandler) -> None:
        try:
            while True:
                try:
                    message = await pubsub.get_message(timeout=None)
                except (RedisConnectionError, RedisTimeoutError, OSError) as error:
                    logger.warning(
                        "[mesh-redis] %s lost its subscription: %s", self.agent_id, error
                    )
                    await _close_quietly(pubsub)
                    pubsub = await self._reconnect()
                    continue
                if message is None or message.get("type") != "message":
                    continue
                await self._dispatch(message["data"], handler)
        finally:
            await _close_quietly(pubsub)

    async def _reconnect(self) -> Any:
        delay = self.reconnect_delay
        while True:
            await asyncio.sleep(delay)
            try:
                pubsub = await self._open_subscription()
                if self._identity is not None:
                    # A restarted Redis may have lost the registry; put ourselves back.
                    await self.client.hset(
                        AGENTS_KEY, self.agent_id, json.dumps(self._identity.to_dict())
                    )
            except (RedisConnectionError, RedisTimeoutError, OSError):
                delay = min(delay * 2, 2.0)
                continue
            logger.info("[mesh-redis] %s resubscribed", self.agent_id)
            return pubsub

    async def _dispatch(self, raw: str, handler: MeshHandler) -> None:
        try:
            wire = json.loads(raw)
            message = IncomingMeshMessage.from_dict(wire)
        except (ValueError, TypeError):
            logger.warning("[mesh-redis] %s ignored a malformed message", self.agent_id)
            return
        if message.kind == "broadcast" and message.from_ == self.agent_id:
            return
        if not self.guard.admit(wire, self.agent_id):
            return
        if message.kind != "ack":
            self._received_from[message.id] = message.from_
            if len(self._received_from) > RECEIVED_MEMORY:
                self._received_from.popitem(last=False)
        try:
            await handler(message)
        except Exception:
            logger.exception("[mesh-redis] handler:")


async def _close_quietly(pubsub: Any) -> None:
    with contextlib.suppress(Exception):
        await pubsub.aclose()


def _parse_identity(value: str) -> AgentIdentity | None:
    try:
        data = json.loads(value)
        return AgentIdentity.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


class RedisMeshTransport:
    def __init__(
        self,
        *,
        url: str = "redis://127.0.0.1:6379/0",
        sender_ttl: int = DEFAULT_SENDER_TTL,
        signing_keys: Mapping[str, str] | None = None,
        access: Mapping[str, Iterable[str]] | None = None,
        max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("url must be a redis://, rediss:// or unix:// URL")
        if not isinstance(sender_ttl, int) or sender_ttl <= 0:
            raise ValueError("sender_ttl must be a positive number of seconds")
        self.url = url
        self.sender_ttl = sender_ttl
        self.guard = MeshGuard(signing_keys=signing_keys, access=access, max_age=max_age)
        self._client: aioredis.Redis | None = None
        self._subscriber_client: aioredis.Redis | None = None

    def adapter(self, agent_id: str) -> RedisMeshAdapter:
        # Clients are built on first use, inside the event loop that will use them.
        if self._client is None:
            self._client = make_client(self.url)
            self._subscriber_client = make_subscriber_client(self.url)
        return RedisMeshAdapter(
            agent_id,
            client=self._client,
            subscriber_client=self._subscriber_client,
            guard=self.guard,
            sender_ttl=self.sender_ttl,
        )

    async def close(self) -> None:
        for client in (self._client, self._subscriber_client):
            if client is not None:
                await client.aclose()
        self._client = self._subscriber_client = None
