"""Every write of the database mesh transport, each one transaction (`mesh_<entity>_<action>`).

Delivering a message inserts the recipient's resolved inbox item, its `MeshDelivery` row and
a live event on the stream `mesh:<recipient>` in one transaction, so a message is either
delivered completely or not at all, an offline recipient finds it in its inbox when it comes
back, and the unique (message id, recipient) constraint delivers a retried send at most once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from gloveapp.conversations.models import Session
from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.partitions import is_partitioned, lock_keys, partitions_prune
from gloveapp.lib.wake import MESH as WAKE_MESH
from gloveapp.lib.wake import wake_after_commit
from gloveapp.live.eventlog import record_event, record_events
from gloveapp.live.streams import mesh_stream
from inbox.models import InboxItem
from inbox.services import inbox_item_add, inbox_item_resolve, inbox_items_deliver
from mesh import refusals
from mesh.core.errors import MeshUnknownAgentError, MeshUnknownMessageError
from mesh.core.inbound import ack_response, inbound_item, late_ack_item, waiting_tag
from mesh.core.security import frame_time
from mesh.core.types import AgentIdentity, IncomingMeshMessage
from mesh.models import MeshAgent, MeshDelivery, MeshSentMessage


def mesh_session_id(agent_id: str) -> str:
    """The DjangoStore session that is agent <id>'s inbox on the database transport (a
    prefix of `SERVER_ID_PREFIXES`: no user's session can hold that id)."""
    return f"mesh:{agent_id}"


# -- registry -------------------------------------------------------------------------------


def mesh_agent_register(*, identity: AgentIdentity, inbox_session: str = "") -> MeshAgent:
    agent, _ = MeshAgent.objects.update_or_create(
        agent_id=identity.id,
        defaults={
            "inbox_session": inbox_session,
            "name": identity.name,
            "description": identity.description,
            "capabilities": identity.capabilities,
            "metadata": identity.metadata,
        },
    )
    return agent


def mesh_agent_unregister(*, agent_id: str) -> None:
    MeshAgent.objects.filter(agent_id=agent_id).delete()


def mesh_prune(*, older_than: timedelta) -> dict[str, int]:
    """Forget what the database transport no longer needs, older than `older_than`, in
    bounded batches. The turn worker's scheduler runs it (GLOVE_RETAIN_MESH_DAYS), and
    `prune_mesh` by hand.

    - sender rows (`MeshSentMessage`): an ack for a message sent before the cut is refused
      as one for an unknown message;
    - deliveries (`MeshDelivery`): the record that delivers a retried send at most once; a
      send retried after the cut is delivered again;
    - registrations of chats whose session was deleted (a chat registers itself with its
      session as its inbox, and nothing unregisters it when the chat is deleted).
    """
    cut = timezone.now() - older_than
    senders = _prune_log(MeshSentMessage, "created_at", cut)
    deliveries = _prune_log(MeshDelivery, "delivered_at", cut)
    registrations = delete_in_batches(
        MeshAgent.objects.exclude(inbox_session="")
        .filter(registered_at__lt=cut)
        .exclude(inbox_session__in=Session.objects.values("id"))
    )
    return {"sent_messages": senders, "deliveries": deliveries, "registrations": registrations}


def _prune_log(model: Any, column: str, cut: Any) -> int:
    """On PostgreSQL whole days are dropped (`gloveapp.lib.db.partitions`); elsewhere rows go in
    bounded batches."""
    table = model._meta.db_table
    if is_partitioned(table):
        return partitions_prune(table, column=column, cut=cut, batch=settings.GLOVE_RETENTION_BATCH)
    return delete_in_batches(model.objects.filter(**{f"{column}__lt": cut}))


def _record_senders(messages: Iterable[IncomingMeshMessage]) -> None:
    """The sender of each message id, the first one kept (an ack goes to it). On
    PostgreSQL the table is partitioned by day and its unique index covers one day: a
    writer locks the ids first (`lock_keys`), then inserts those no day holds yet."""
    senders: dict[str, MeshSentMessage] = {}
    for message in messages:
        senders.setdefault(
            message.id,
            MeshSentMessage(message_id=message.id, sender=message.from_, kind=message.kind),
        )
    if connection.vendor == "postgresql" and senders:
        lock_keys(MeshSentMessage._meta.db_table, senders)
        for known in MeshSentMessage.objects.filter(message_id__in=list(senders)).values_list(
            "message_id", flat=True
        ):
            senders.pop(known, None)
    MeshSentMessage.objects.bulk_create(list(senders.values()), ignore_conflicts=True)


def agent_identity(agent: MeshAgent) -> AgentIdentity:
    return AgentIdentity(
        id=agent.agent_id,
        name=agent.name,
        description=agent.description,
        capabilities=agent.capabilities,
        metadata=agent.metadata,
    )


def mesh_agents_list(*, viewer: str | None = None) -> list[AgentIdentity]:
    """Every registered agent, or, for `viewer`, those it may reach (`mesh_reachable`)."""
    agents = list(MeshAgent.objects.all())
    if viewer is not None:
        visible = mesh_reachable(sender=viewer, candidates=[agent.agent_id for agent in agents])
        agents = [agent for agent in agents if agent.agent_id in visible]
    return [agent_identity(agent) for agent in agents]


def mesh_agent_get(agent_id: str, *, viewer: str | None = None) -> AgentIdentity | None:
    if viewer is not None and agent_id not in mesh_reachable(sender=viewer, candidates=[agent_id]):
        return None
    agent = MeshAgent.objects.filter(agent_id=agent_id).first()
    return agent_identity(agent) if agent is not None else None


# -- who may reach whom -----------------------------------------------------------------------
# A chat on the mesh (GLOVE_CHAT_MESH: an agent whose inbox is a conversation session) is a
# peer of the server's own agents, never of other people's chats: its model reads what
# arrives, so a message from another user's chat would be a prompt injection across users.
# Every entry point of the database transport (list, get, send, broadcast, ack) asks
# `mesh_reachable`; what it leaves out is answered as if it did not exist, so ids don't leak.
# An external A2A agent on the mesh (`mesh.a2a`) is a server agent, but one that sends what
# it is told outside, with the server's credentials: chats reach it only if its
# configuration says so (`MESH_A2A_PEERS` "chats"), which its registration carries.


def _chat_owners(agent_ids: Iterable[str]) -> dict[str, str]:
    """The chats among `agent_ids`, each with its owner's key (a chat without an owner is
    its own owner: it shares with no one)."""
    sessions = dict(
        MeshAgent.objects.filter(agent_id__in=set(agent_ids))
        .exclude(inbox_session="")
        .values_list("agent_id", "inbox_session")
    )
    if not sessions:
        return {}
    owners = dict(
        Session.objects.filter(pk__in=set(sessions.values())).values_list("id", "owner_id")
    )
    return {
        agent_id: f"user:{owners[session]}" if owners.get(session) else f"session:{session}"
        for agent_id, session in sessions.items()
    }


def _closed_to_chats(agent_ids: Iterable[str]) -> set[str]:
    """The external A2A agents among `agent_ids` that chats may not reach."""
    return set(
        MeshAgent.objects.filter(
            agent_id__in=set(agent_ids), metadata__a2a__chats=False
        ).values_list("agent_id", flat=True)
    )


def mesh_reachable(*, sender: str, candidates: Iterable[str], broadcast: bool = False) -> set[str]:
    """The `candidates` that `sender` may see and message (the access rules come on top).

    Agents that are not chats: everyone (for a chat, but an A2A agent closed to chats). A
    chat: the chats of the same owner; and, for a server agent (not a chat), only a chat that
    wrote to it before (its replies and acks), never by broadcast."""
    candidates = set(candidates)
    chats = _chat_owners(candidates | {sender})
    own = chats.get(sender)
    reachable = {
        agent_id
        for agent_id in candidates
        if agent_id not in chats or (own is not None and chats[agent_id] == own)
    }
    if own is not None and reachable:
        reachable -= _closed_to_chats(reachable)
    if own is None and not broadcast:
        asked = [agent_id for agent_id in candidates if agent_id not in reachable]
        if asked:
            reachable.update(
                MeshDelivery.objects.filter(recipient=sender, sender__in=asked)
                .values_list("sender", flat=True)
                .distinct()
            )
    return reachable


def _name_of(agent_id: str) -> str:
    name = MeshAgent.objects.filter(agent_id=agent_id).values_list("name", flat=True).first()
    return name or agent_id


# -- delivery -------------------------------------------------------------------------------


def _claim(
    message: IncomingMeshMessage,
    recipient: str,
    wire: dict[str, Any],
    item_id: str | None = None,
) -> int | None:
    """Insert the delivery row; its id, or None if this message already reached this recipient
    (the unique (message id, recipient) constraint is the arbiter; see `_claim_many`)."""
    return _claim_many([(message, recipient, wire, item_id)]).get((message.id, recipient))


def inbox_session_of(agent_id: str) -> str:
    """Where agent <id>'s inbox lives: its registered session, else `mesh:<id>`."""
    session = (
        MeshAgent.objects.filter(agent_id=agent_id).values_list("inbox_session", flat=True).first()
    )
    return session or mesh_session_id(agent_id)


def _store(recipient: str, item: CoreInboxItem) -> InboxItem:
    return inbox_item_add(session_id=inbox_session_of(recipient), item=item, resolved_by="mesh")


def _announce(delivery_id: int, recipient: str, wire: dict[str, Any]) -> None:
    record_event(
        stream=mesh_stream(recipient),
        type="mesh.delivered",
        payload={"delivery": delivery_id, "message": wire},
    )


def _claim_many(
    deliveries: list[tuple[IncomingMeshMessage, str, dict[str, Any], str | None]],
) -> dict[tuple[str, str], int]:
    """Insert delivery rows for many (message, recipient, wire, item id) at once; the
    (message id, recipient) pairs that were new, with their delivery ids.

    One multi-row `INSERT ... ON CONFLICT DO NOTHING RETURNING` (PostgreSQL and SQLite >=
    3.35): the unique (message id, recipient) key decides, without a savepoint; a pair
    twice in one batch is inserted once. On PostgreSQL the table is partitioned by day and
    its unique index covers one day, so the pairs are locked first (`lock_keys`: a
    concurrent send of a pair waits for this transaction) and those some day already holds
    are left out. The inbox items the rows point to are inserted right after, in the same
    transaction (foreign keys are checked at commit)."""
    if connection.vendor == "postgresql" and deliveries:
        pairs = {(message.id, recipient) for message, recipient, _, _ in deliveries}
        lock_keys(MeshDelivery._meta.db_table, [f"{m}\x00{r}" for m, r in pairs])
        known = set(
            MeshDelivery.objects.filter(
                message_id__in={m for m, _ in pairs}, recipient__in={r for _, r in pairs}
            ).values_list("message_id", "recipient")
        )
        deliveries = [d for d in deliveries if (d[0].id, d[1]) not in known]
    if not deliveries:
        return {}
    table = MeshDelivery._meta.db_table
    now = timezone.now()
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(deliveries))
    params: list[Any] = []
    for message, recipient, wire, item_id in deliveries:
        params += [
            message.id,
            recipient,
            message.from_,
            message.kind,
            json.dumps(wire),
            item_id,
            now,
        ]
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{table}" '
            "(message_id, recipient, sender, kind, body, inbox_item_id, delivered_at) "
            f"VALUES {values} ON CONFLICT DO NOTHING "
            "RETURNING message_id, recipient, id",
            params,
        )
        claimed = {(message_id, recipient): pk for message_id, recipient, pk in cursor.fetchall()}
    if claimed:
        # SQLite: the recipients polling on this machine look now (gloveapp.lib.wake).
        wake_after_commit(WAKE_MESH)
    return claimed


def _max_age(max_age: float | None) -> float:
    return float(max_age if max_age is not None else getattr(settings, "MESH_MAX_AGE_SECONDS", 300))


def _fresh(message: IncomingMeshMessage, max_age: float) -> bool:
    """A message is delivered only within `max_age` seconds of its `created_at` (either way):
    the unique delivery row refuses a replayed id, and this bounds how long that row matters."""
    stamp = frame_time(message.created_at)
    if stamp is not None and abs(timezone.now().timestamp() - stamp) <= max_age:
        return True
    refusals.record("stale")
    return False


def mesh_messages_deliver(
    *,
    sends: list[tuple[IncomingMeshMessage, dict[str, Any], list[str]]],
    max_age: float | None = None,
) -> list[int]:
    """Deliver direct messages and broadcasts, each `(message, wire, recipients)`, in the
    caller's transaction with a fixed number of statements for the whole batch: the sender
    table, one registry read, one delivery insert (the unique (message id, recipient)
    constraint decides what is new), per recipient session one item insert with its
    `inbox.changed` events, per recipient one batch of `mesh.delivered` events. Returns, per
    send, how many recipients got it now (the others had it already, or it was stale)."""
    limit = _max_age(max_age)
    stale = {index for index, (message, _, _) in enumerate(sends) if not _fresh(message, limit)}
    with transaction.atomic(savepoint=False):
        _record_senders(message for message, _, _ in sends)
        agents = {message.from_ for message, _, _ in sends}
        for _, _, recipients in sends:
            agents.update(recipients)
        # One read of the registry for the senders' names and every recipient's inbox.
        registry = {
            agent_id: (name, inbox_session)
            for agent_id, name, inbox_session in MeshAgent.objects.filter(
                agent_id__in=agents
            ).values_list("agent_id", "name", "inbox_session")
        }
        planned = []
        for index, (message, wire, recipients) in enumerate(sends):
            if index in stale:
                continue
            peer_name = registry.get(message.from_, (message.from_, ""))[0]
            for recipient in recipients:
                planned.append((index, message, wire, recipient, inbound_item(message, peer_name)))
        claimed = _claim_many(
            [(message, recipient, wire, item.id) for _, message, wire, recipient, item in planned]
        )
        delivered = [0] * len(sends)
        by_session: dict[str, list[CoreInboxItem]] = {}
        by_recipient: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        replies = []
        for index, message, wire, recipient, item in planned:
            delivery_id = claimed.pop((message.id, recipient), None)
            if delivery_id is None:
                # Delivered before (a retried or replayed send), or twice in this batch.
                refusals.record("replay")
                continue
            session = registry.get(recipient, ("", ""))[1] or mesh_session_id(recipient)
            by_session.setdefault(session, []).append(item)
            by_recipient.setdefault(recipient, []).append(
                ("mesh.delivered", {"delivery": delivery_id, "message": wire})
            )
            if message.kind == "direct" and message.in_reply_to:
                replies.append((recipient, message.in_reply_to, message.content))
            delivered[index] += 1
        for session, items in by_session.items():
            inbox_items_deliver(session_id=session, items=items)
        for recipient, in_reply_to, content in replies:
            # Reply implies ack, in the same transaction as the reply itself.
            _resolve_wait(recipient, in_reply_to, content)
        for recipient, events in by_recipient.items():
            record_events(stream=mesh_stream(recipient), events=events)
    return delivered


def mesh_message_deliver(
    *,
    message: IncomingMeshMessage,
    wire: dict[str, Any],
    recipients: list[str],
    max_age: float | None = None,
) -> int:
    """Deliver a direct message or broadcast to `recipients`; returns how many got it now
    (the others had it already)."""
    return mesh_messages_deliver(sends=[(message, wire, recipients)], max_age=max_age)[0]


def mesh_broadcast_send(
    *,
    message: IncomingMeshMessage,
    wire: dict[str, Any],
    may_receive: Callable[[str], bool],
    max_age: float | None = None,
) -> int:
    with transaction.atomic():
        registered = MeshAgent.objects.values_list("agent_id", flat=True)
        reachable = mesh_reachable(sender=message.from_, candidates=registered, broadcast=True)
        recipients = [
            agent_id
            for agent_id in registered
            if agent_id != message.from_ and agent_id in reachable and may_receive(agent_id)
        ]
        return mesh_message_deliver(
            message=message, wire=wire, recipients=recipients, max_age=max_age
        )


def mesh_direct_send(
    *, message: IncomingMeshMessage, wire: dict[str, Any], max_age: float | None = None
) -> int:
    [outcome] = mesh_direct_send_many(sends=[(message, wire)], max_age=max_age)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def mesh_direct_send_many(
    *, sends: list[tuple[IncomingMeshMessage, dict[str, Any]]], max_age: float | None = None
) -> list[int | Exception]:
    """Several direct sends in one transaction (the database adapter's group commit): per
    send, how many got it now (0 or 1), or the `MeshUnknownAgentError` it failed with (also
    for an agent the sender may not reach: see `mesh_reachable`)."""
    with transaction.atomic():
        wanted = {message.to for message, _ in sends if message.to}
        registered = set(
            MeshAgent.objects.filter(agent_id__in=wanted).values_list("agent_id", flat=True)
        )
        by_sender: dict[str, set[str]] = {}
        for message, _ in sends:
            if message.to in registered:
                by_sender.setdefault(message.from_, set()).add(message.to)
        reachable = {
            (sender, recipient)
            for sender, recipients in by_sender.items()
            for recipient in mesh_reachable(sender=sender, candidates=recipients)
        }
        known = {(message.from_, message.to) for message, _ in sends} & reachable
        unknown = [message for message, _ in sends if (message.from_, message.to) not in known]
        if unknown and len(unknown) < len(sends):
            # The senders are recorded in two steps below: their locks first, all in one
            # order, so two such batches sharing ids cannot deadlock (`lock_keys`).
            lock_keys(MeshSentMessage._meta.db_table, [message.id for message, _ in sends])
        if unknown:
            # As glove-mesh does, the sender is recorded even when the send then fails.
            _record_senders(unknown)
        good = [
            (message, wire, [message.to])
            for message, wire in sends
            if (message.from_, message.to) in known
        ]
        counts = iter(mesh_messages_deliver(sends=good, max_age=max_age) if good else [])
        return [
            next(counts)
            if (message.from_, message.to) in known
            else MeshUnknownAgentError(message.to or "(missing `to` field)")
            for message, _ in sends
        ]


def _resolve_wait(agent_id: str, message_id: str, response: str) -> bool | None:
    """True: resolved now; False: it was already over; None: agent never waited on it."""
    item_id = (
        InboxItem.objects.filter(session_id=inbox_session_of(agent_id), tag=waiting_tag(message_id))
        .values_list("id", flat=True)
        .first()
    )
    if item_id is None:
        return None
    try:
        inbox_item_resolve(item_id=item_id, response=response, resolved_by="mesh")
    except InboxTransitionError:
        return False
    except InboxItemNotFound:
        return None
    return True


def mesh_ack_deliver(
    *, ack: IncomingMeshMessage, wire: dict[str, Any], max_age: float | None = None
) -> None:
    """Route an ack to the sender of `ack.ack_of`: resolve its wait, or surface it as an
    ordinary item when the wait is already over (Decision 7); drop it for a message the
    sender never waited on. Raises `MeshUnknownMessageError` for an unknown message id."""
    with transaction.atomic():
        original = MeshSentMessage.objects.filter(message_id=ack.ack_of).first()
        if original is None:
            raise MeshUnknownMessageError(ack.ack_of or "")
        recipient = original.sender
        if recipient not in mesh_reachable(sender=ack.from_, candidates=[recipient]):
            raise MeshUnknownMessageError(ack.ack_of or "")
        ack.to = recipient
        wire["to"] = recipient
        if not _fresh(ack, _max_age(max_age)):
            return
        delivery_id = _claim(ack, recipient, wire)
        if delivery_id is None:
            refusals.record("replay")
            return
        # No waiting item (a non-blocking send): the inbox is left alone, as in glove-mesh;
        # the delivery row still routes the ack to the sender's handler.
        outcome = _resolve_wait(recipient, ack.ack_of or "", ack_response(ack))
        if outcome is False:
            late = _store(recipient, late_ack_item(ack, _name_of(ack.from_)))
            MeshDelivery.objects.filter(pk=delivery_id).update(inbox_item_id=late.pk)
        _announce(delivery_id, recipient, wire)


def mesh_sender_of(message_id: str) -> str | None:
    return (
        MeshSentMessage.objects.filter(message_id=message_id)
        .values_list("sender", flat=True)
        .first()
    )


def mesh_deliveries_after(*, recipient: str, after: int, limit: int = 200) -> list[MeshDelivery]:
    return list(
        MeshDelivery.objects.filter(recipient=recipient, pk__gt=after).order_by("pk")[:limit]
    )


def mesh_delivery_cursor(*, recipient: str) -> int:
    last = (
        MeshDelivery.objects.filter(recipient=recipient)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    return last or 0
