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
sees it (the database transport is the durable one). So the reader looks after itself: a
frame that is not a mesh message (not UTF-8, not JSON, wrongly shaped) is counted
(`skipped_frames`) and skipped; when the reader stops for any other reason (Redis killed,
restarted or refusing the subscription) the agent is taken off `mesh:agents` if Redis still
answers, so a sender gets `MeshUnknownAgentError` instead of publishing into the void, and
the reader reconnects with backoff (at most `MAX_BACKOFF` apart), resubscribes and registers
its identity again (a restarted Redis without persistence has forgotten `mesh:agents`).
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

from gloveapp.observe import metrics
from mesh.core.adapter import MeshHandler, Unsubscribe
from mesh.core.errors import MeshAccessDeniedError, MeshUnknownAgentError, MeshUnknownMessageError
from mesh.core.security import DEFAULT_MAX_AGE, MeshGuard
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, build_ack

logger = logging.getLogger("mesh")

AGENTS_KEY = "mesh:agents"
BROADCAST_CHANNEL = "mesh:broadcast"
DEFAULT_SENDER_TTL = 3600
RECEIVED_MEMORY = 4096
# The reader's reconnect backoff tops out here: an agent is unavailable at most about this
# long after Redis returns.
MAX_BACKOFF = 1.0
SUBSCRIBE_TIMEOUT = 5.0
UNREGISTER_TIMEOUT = 1.0
# A stream of garbage must not flood the log: the first malformed frame is logged, then
# every this-many-th.
SKIPPED_LOG_EVERY = 1000


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
    # Replies stay bytes: anyone may write the registry, and one value that is not UTF-8
    # must not break listing the others.
    return aioredis.Redis.from_url(
        url,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=8),
        retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionError, OSError],
    )


def make_subscriber_client(url: str) -> aioredis.Redis:
    # No silent retries here: redis-py would resubscribe quietly, and the adapter must know
    # Redis came back so it can register its identity again. Frames stay bytes: anyone may
    # publish on the channels, and decoding is the reader's job (a frame that is not UTF-8
    # is skipped, not fatal).
    return aioredis.Redis.from_url(url, retry=Retry(NoBackoff(), 0))


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
        # Frames that were not mesh messages (not UTF-8, not JSON, wrongly shaped): skipped.
        self.skipped_frames = 0
        # How often the reader stopped and was started again.
        self.reader_restarts = 0

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
        sender = self._received_from.get(message_id) or _text(
            await self.client.get(sender_key(message_id))
        )
        if not sender:
            raise MeshUnknownMessageError(message_id)
        if not self.guard.may_message(self.agent_id, sender):
            raise MeshAccessDeniedError(self.agent_id, sender)
        ack = build_ack(original_sender=sender, ack_of=message_id, sender=self.agent_id, note=note)
        await self.client.publish(agent_channel(sender), json.dumps(self.guard.sign(ack.to_dict())))

    # -- inbound -------------------------------------------------------------------------------
    async def subscribe(self, handler: MeshHandler) -> Unsubscribe:
        # The first subscription must work (mounting on a Redis that is away fails loudly);
        # after that the reader keeps itself alive.
        pubsub, early = await self._open_subscription()
        task = asyncio.create_task(
            self._keep_reading(pubsub, early, handler), name=f"mesh-redis-{self.agent_id}"
        )

        async def unsubscribe() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

        return unsubscribe

    async def _open_subscription(self) -> tuple[Any, list[dict]]:
        """Subscribe and wait until Redis confirmed both channels (an ACL refusal or a dead
        connection raises here). Returns the pubsub and any message that arrived between the
        two confirmations: nothing published after this returns is missed."""
        pubsub = self.subscriber_client.pubsub()
        try:
            await pubsub.subscribe(agent_channel(self.agent_id), BROADCAST_CHANNEL)
            confirmed, early = 0, []
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                while confirmed < 2:
                    message = await pubsub.get_message(timeout=SUBSCRIBE_TIMEOUT)
                    if message is None:
                        continue
                    if message.get("type") == "subscribe":
                        confirmed += 1
                    elif message.get("type") == "message":
                        early.append(message)
        except BaseException:
            await _close_quietly(pubsub)
            raise
        return pubsub, early

    async def _keep_reading(self, pubsub: Any, early: list[dict], handler: MeshHandler) -> None:
        """The reader's supervisor: whatever stops the reader (Redis away, a refused
        subscription, a bug), the agent is taken off the registry while it cannot hear
        (senders get `MeshUnknownAgentError` rather than publishing into the void), and the
        reader is started again with backoff, registering the agent again once it hears."""
        failures = 0
        while True:
            try:
                if pubsub is None:
                    pubsub, early = await self._open_subscription()
                    if self._identity is not None:
                        # Back on the registry (a restarted Redis may also have lost it).
                        await self.client.hset(
                            AGENTS_KEY, self.agent_id, json.dumps(self._identity.to_dict())
                        )
                    logger.warning(
                        "[mesh-redis] %s listens again (after %d failed attempts)",
                        self.agent_id,
                        failures,
                    )
                    metrics.redis_reconnected("mesh")
                    failures = 0
                for message in early:
                    await self._dispatch(message.get("data"), handler)
                early = []
                await self._read(pubsub, handler)
            except asyncio.CancelledError:
                await _close_quietly(pubsub)
                raise
            except Exception as error:
                failures += 1
                self.reader_restarts += 1
                if failures == 1:
                    away = isinstance(error, (RedisConnectionError, RedisTimeoutError, OSError))
                    logger.warning(
                        "[mesh-redis] %s stopped listening (%s: %s); unavailable until it "
                        "listens again",
                        self.agent_id,
                        type(error).__name__,
                        error,
                        exc_info=not away,
                    )
                    await self._mark_unavailable()
                await _close_quietly(pubsub)
                pubsub = None
                await asyncio.sleep(min(self.reconnect_delay * 2 ** (failures - 1), MAX_BACKOFF))

    async def _mark_unavailable(self) -> None:
        # Best effort, and bounded: when Redis itself is away this cannot work (and a
        # restarted Redis without persistence has forgotten the agent anyway).
        if self._identity is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(UNREGISTER_TIMEOUT):
                await self.client.hdel(AGENTS_KEY, self.agent_id)

    async def _read(self, pubsub: Any, handler: MeshHandler) -> None:
        """Dispatch messages until the subscription fails (it raises; it never returns)."""
        while True:
            message = await pubsub.get_message(timeout=None)
            if message is None or message.get("type") != "message":
                continue
            await self._dispatch(message.get("data"), handler)

    async def _dispatch(self, raw: Any, handler: MeshHandler) -> None:
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            wire = json.loads(text)
            message = IncomingMeshMessage.from_dict(wire)
            if message.kind == "broadcast" and message.from_ == self.agent_id:
                return
            admitted = self.guard.admit(wire, self.agent_id)
        except Exception as error:  # not UTF-8, not JSON, too deep, not a mesh message
            self.skipped_frames += 1
            if self.skipped_frames == 1 or self.skipped_frames % SKIPPED_LOG_EVERY == 0:
                logger.warning(
                    "[mesh-redis] %s skipped a malformed frame (%s; %d so far)",
                    self.agent_id,
                    type(error).__name__,
                    self.skipped_frames,
                )
            return
        if not admitted:
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
    if pubsub is None:
        return
    with contextlib.suppress(Exception):
        await pubsub.aclose()


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _parse_identity(value: Any) -> AgentIdentity | None:
    try:
        data = json.loads(value)
        return AgentIdentity.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
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
