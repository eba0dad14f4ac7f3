"""The database transport: durable delivery through the ORM (any database Django runs on).

Every agent's inbox is the DjangoStore session `mesh:<agent id>` (`mesh_store(agent_id)`).
The sender's call writes the recipient's inbox item, a `MeshDelivery` row and a live event in
one transaction (see `mesh.services`): the message is in the recipient's inbox whether or not
the recipient is running, nothing is lost across restarts, and a message id reaches each
recipient at most once. A running recipient notices new deliveries by polling its
`MeshDelivery` rows (an indexed range read) every `poll_interval` seconds and is woken.

Access rules apply as on the other transports. Signing does not: the delivery is written by
the sender's process straight into the database, so whoever can write that database can
write any inbox; a signature would prove nothing more. Secure the database instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from asgiref.sync import sync_to_async

from gloveapp.lib.db.outages import Backoff, healing
from gloveapp.lib.wake import MESH as WAKE_MESH
from gloveapp.lib.wake import WakeListener
from mesh import services
from mesh.core.adapter import MeshHandler, Unsubscribe
from mesh.core.errors import MeshAccessDeniedError, MeshUnknownAgentError, MeshUnknownMessageError
from mesh.core.security import DEFAULT_MAX_AGE, MeshGuard
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, build_ack

logger = logging.getLogger("mesh")
# With wake-ups (SQLite), how often an idle recipient looks anyway, in case one was lost.
WAKE_RECHECK_SECONDS = 1.0


def _run(function: Any) -> Any:
    # A call that fails because the database went away closes its thread's broken
    # connection: the next one opens a new connection (gloveapp.lib.db).
    return sync_to_async(healing(function), thread_sensitive=True)


def mesh_store(agent_id: str, **options: Any) -> Any:
    """The store an agent on the database transport must use: its mesh inbox session."""
    from gloveapp.ormstore.store import DjangoStore

    return DjangoStore(services.mesh_session_id(agent_id), resolved_by="mesh", **options)


class GroupCommit:
    """Direct sends of one process that overlap share a transaction.

    A send waits for the transaction that writes it to commit, as before; but while one
    transaction is being written, the sends that arrive queue up and go together in the
    next one (at most `max_batch`), so a process sending many messages at once (a worker
    running many turns, an agent sending several messages) pays the fixed cost of a
    delivery (its statements, its commit) once per batch instead of once per message. A
    lone send goes at once, alone. If a batch fails, its sends are retried one by one, so a
    bad send fails alone.
    """

    def __init__(self, *, max_batch: int = 200, max_age: float = DEFAULT_MAX_AGE) -> None:
        self.max_batch = max_batch
        self.max_age = max_age
        # Per event loop: a transport is shared by a process, which may run several loops.
        self._queues: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
        self._flushes: set[asyncio.Task[None]] = set()

    async def send(self, message: IncomingMeshMessage, wire: dict[str, Any]) -> int:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        future = loop.create_future()
        if queue is not None:
            queue.append((message, wire, future))  # a flush is under way: join the next batch
            return await future
        self._queues[loop] = queue = [(message, wire, future)]
        flush = loop.create_task(self._flush(loop, queue))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)
        return await future

    async def _flush(self, loop: Any, queue: list[Any]) -> None:
        batch: list[Any] = []
        try:
            while queue:
                batch = queue[: self.max_batch]
                del queue[: self.max_batch]
                await self._write(batch)
        except BaseException as error:
            # Cancelled (the loop is closing): no sender may wait forever.
            for _, _, future in [*batch, *queue]:
                if future.done():
                    continue
                if isinstance(error, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(error)
            raise
        finally:
            self._queues.pop(loop, None)

    async def _write(self, batch: list[Any]) -> None:
        sends = [(message, wire) for message, wire, _ in batch]
        try:
            outcomes = await _run(services.mesh_direct_send_many)(sends=sends, max_age=self.max_age)
        except Exception as error:
            if len(batch) == 1:
                outcomes = [error]
            else:
                for one in batch:
                    await self._write([one])
                return
        for (_, _, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue  # its sender stopped waiting (cancelled); it was written anyway
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


class DatabaseMeshAdapter:
    # The transport writes the recipient's inbox itself; mount_mesh only wakes the agent.
    delivers_to_inbox = True

    def __init__(
        self,
        agent_id: str,
        *,
        guard: MeshGuard,
        poll_interval: float,
        inbox_session: str | None = None,
        group_commit: GroupCommit | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.group_commit = group_commit or GroupCommit()
        # Where deliveries to this agent are written; a chat agent's inbox is its chat.
        self.inbox_session = inbox_session or services.mesh_session_id(agent_id)
        self.identifier = f"database-mesh-{agent_id}"
        self.guard = guard
        self.poll_interval = poll_interval

    def check_store(self, store: Any) -> None:
        expected = self.inbox_session
        if getattr(store, "identifier", None) != expected:
            raise ValueError(
                f'On the database mesh transport, agent "{self.agent_id}" must use the store '
                f'of session "{expected}" (mesh.transports.database.mesh_store).'
            )

    # -- registry ------------------------------------------------------------------------------
    async def register(self, identity: AgentIdentity) -> None:
        registered = self.inbox_session
        await _run(services.mesh_agent_register)(
            identity=identity,
            inbox_session=""
            if registered == services.mesh_session_id(self.agent_id)
            else registered,
        )

    async def unregister(self) -> None:
        await _run(services.mesh_agent_unregister)(agent_id=self.agent_id)

    async def list_agents(self) -> list[AgentIdentity]:
        # Only whom this agent may reach (a chat sees no other owner's chats).
        return await _run(services.mesh_agents_list)(viewer=self.agent_id)

    async def get_agent(self, agent_id: str) -> AgentIdentity | None:
        return await _run(services.mesh_agent_get)(agent_id, viewer=self.agent_id)

    # -- outbound ------------------------------------------------------------------------------
    async def send(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        if message.to and not self.guard.may_message(self.agent_id, message.to):
            raise MeshAccessDeniedError(self.agent_id, message.to)
        incoming = IncomingMeshMessage.from_message(message, "direct")
        await self.group_commit.send(incoming, incoming.to_dict())

    async def broadcast(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        message.to = None
        incoming = IncomingMeshMessage.from_message(message, "broadcast")
        await _run(services.mesh_broadcast_send)(
            message=incoming,
            wire=incoming.to_dict(),
            may_receive=lambda recipient: self.guard.may_message(self.agent_id, recipient),
            max_age=self.guard.max_age,
        )

    async def acknowledge(self, message_id: str, note: str | None = None) -> None:
        sender = await _run(services.mesh_sender_of)(message_id)
        if sender is None:
            raise MeshUnknownMessageError(message_id)
        if not self.guard.may_message(self.agent_id, sender):
            raise MeshAccessDeniedError(self.agent_id, sender)
        ack = build_ack(original_sender=sender, ack_of=message_id, sender=self.agent_id, note=note)
        await _run(services.mesh_ack_deliver)(
            ack=ack, wire=ack.to_dict(), max_age=self.guard.max_age
        )

    # -- inbound -------------------------------------------------------------------------------
    async def subscribe(self, handler: MeshHandler) -> Unsubscribe:
        # Deliveries before now are already in the inbox; from here on, each one wakes us.
        cursor = await _run(services.mesh_delivery_cursor)(recipient=self.agent_id)
        task = asyncio.create_task(self._poll(cursor, handler), name=f"mesh-db-{self.agent_id}")

        async def unsubscribe() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        return unsubscribe

    async def _poll(self, cursor: int, handler: MeshHandler) -> None:
        backoff = Backoff(f"[mesh-db] {self.agent_id}'s deliveries", log=logger)
        # SQLite: a sender on this machine wakes us (gloveapp.lib.wake), so an idle recipient
        # looks only every WAKE_RECHECK_SECONDS (a lost wake-up's safety net), not every
        # poll_interval. Elsewhere (no wake-ups) it polls as before.
        arrived = asyncio.Event()
        listener = WakeListener(WAKE_MESH, lambda _payload: arrived.set())
        woken = listener.start()
        try:
            while True:
                arrived.clear()
                try:
                    deliveries = await _run(services.mesh_deliveries_after)(
                        recipient=self.agent_id, after=cursor
                    )
                except Exception as error:
                    # The database away: a new connection after a backoff; what was
                    # delivered meanwhile is read then (the cursor did not move).
                    await asyncio.sleep(backoff.failed(error))
                    continue
                backoff.succeeded()
                for delivery in deliveries:
                    cursor = delivery.pk
                    try:
                        await handler(IncomingMeshMessage.from_dict(delivery.body))
                    except Exception:
                        logger.exception("[mesh-db] handler:")
                if deliveries:
                    continue
                if woken:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(arrived.wait(), WAKE_RECHECK_SECONDS)
                else:
                    await asyncio.sleep(self.poll_interval)
        finally:
            listener.close()


class DatabaseMeshTransport:
    def __init__(
        self,
        *,
        poll_interval: float = 0.05,
        access: Mapping[str, Iterable[str]] | None = None,
        signing_keys: Mapping[str, str] | None = None,
        max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        if signing_keys:
            raise ValueError(
                "signing_keys does not apply to the database transport (the sender writes the "
                "recipient's inbox itself); secure the database instead"
            )
        if not isinstance(poll_interval, int | float) or poll_interval <= 0:
            raise ValueError("poll_interval must be a positive number of seconds")
        self.poll_interval = float(poll_interval)
        self.guard = MeshGuard(access=access, max_age=max_age)
        self.group_commit = GroupCommit(max_age=self.guard.max_age)

    def adapter(self, agent_id: str, *, inbox_session: str | None = None) -> DatabaseMeshAdapter:
        """`inbox_session`: the DjangoStore session that is this agent's inbox (default
        `mesh:<agent id>`), e.g. a chat session whose agent joins the mesh."""
        return DatabaseMeshAdapter(
            agent_id,
            guard=self.guard,
            poll_interval=self.poll_interval,
            inbox_session=inbox_session,
            group_commit=self.group_commit,
        )

    async def close(self) -> None:
        return None


__all__ = [
    "DatabaseMeshAdapter",
    "DatabaseMeshTransport",
    "MeshUnknownAgentError",
    "mesh_store",
]
