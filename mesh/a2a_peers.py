"""External A2A agents as mesh peers: the `MESH_A2A_PEERS` setting and what runs them.

    MESH_A2A_PEERS = {
        "weather": {                                   # its id on the mesh
            "card_url": "https://weather.example/.well-known/agent-card.json",
            "token_env": "WEATHER_A2A_TOKEN",          # the bearer token's variable
            "transport": "default",                    # a key of MESH
            "timeout_seconds": 120,
            "description": "...",                      # instead of the card's
            "chats": False,                            # may chats (GLOVE_CHAT_MESH) reach it
        }
    }

`manage.py run_a2a_peers [NAME ...]` keeps them on the mesh (`mesh.a2a.A2APeer` each): it
reads each card, registers the agent and forwards what arrives for it. Secrets come from the
environment only: an entry names the variable that holds its token, never the token. On the
database transport the peer's inbox is the session `mesh:<id>`, as any agent's: a message
is marked read once its answer went back, so a peer started again forwards what arrived
while it was away (and only that).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings

from gloveapp.conversations.services import DuplicateSession, session_create
from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from gloveapp.lib.db.outages import healing, retry_while_unreachable
from inbox.models import InboxItem
from inbox.services import inbox_item_update
from mesh.core.types import IncomingMeshMessage
from mesh.layers import DEFAULT_ALIAS, InvalidMeshConfig, get_mesh_transport, mesh_config
from mesh.models import MeshDelivery
from mesh.services import mesh_session_id
from mesh.transports.database import DatabaseMeshTransport
from mesh.transports.inprocess import InProcessMeshTransport

if TYPE_CHECKING:
    from mesh.a2a import A2APeer, A2APeerConfig

KEYS = {"card_url", "token_env", "transport", "timeout_seconds", "description", "chats"}
MESH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
DEFAULT_TIMEOUT = 120.0


def a2a_peers_setting() -> dict[str, Any]:
    configured = getattr(settings, "MESH_A2A_PEERS", None)
    return {} if configured is None else configured


def _entry_problem(name: Any, entry: Any) -> str | None:
    """What is wrong with one entry (the token's variable is not looked at here)."""
    where = f"MESH_A2A_PEERS[{name!r}]"
    if not isinstance(name, str) or not MESH_ID.match(name):
        return f"{where}: the key is the peer's mesh id (letters, digits, _ . -; at most 100)."
    if not isinstance(entry, dict):
        return f"{where} must be a dict with a card_url."
    if "token" in entry:
        return (
            f"{where} has a 'token': secrets come from the environment only; name the "
            "variable that holds it in 'token_env'."
        )
    unknown = set(entry) - KEYS
    if unknown:
        return f"{where} has unknown keys: {', '.join(sorted(unknown))}."
    card_url = entry.get("card_url")
    if not isinstance(card_url, str) or not card_url.startswith(("http://", "https://")):
        return f"{where}['card_url'] must be the http(s) URL of the agent's card."
    token_env = entry.get("token_env")
    if token_env is not None and (not isinstance(token_env, str) or not token_env):
        return f"{where}['token_env'] must name an environment variable."
    timeout = entry.get("timeout_seconds", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        return f"{where}['timeout_seconds'] must be a positive number."
    if not isinstance(entry.get("description", ""), str):
        return f"{where}['description'] must be text."
    if not isinstance(entry.get("chats", False), bool):
        return f"{where}['chats'] must be true or false."
    alias = entry.get("transport", DEFAULT_ALIAS)
    if alias not in mesh_config():
        return f"{where}['transport'] names no transport of MESH: {alias!r}."
    return None


def setting_problems() -> list[str]:
    """Every problem of the setting, for the system checks."""
    configured = a2a_peers_setting()
    if not isinstance(configured, dict):
        return ["MESH_A2A_PEERS must be a dict: mesh id -> {card_url, token_env, ...}."]
    return [
        problem
        for name, entry in configured.items()
        if (problem := _entry_problem(name, entry)) is not None
    ]


def missing_tokens() -> list[str]:
    """The `token_env` variables the environment does not set (a warning at check time)."""
    configured = a2a_peers_setting()
    if not isinstance(configured, dict):
        return []
    return [
        f"MESH_A2A_PEERS[{name!r}]['token_env']: {entry['token_env']} is not set."
        for name, entry in configured.items()
        if isinstance(entry, dict)
        and isinstance(entry.get("token_env"), str)
        and entry["token_env"]
        and not os.environ.get(entry["token_env"])
    ]


def peer_config(name: str) -> tuple[A2APeerConfig, str]:
    """The peer called `name` (its config and its transport's alias); `InvalidMeshConfig`
    for a peer that is not configured, a bad entry, or a token variable that is not set."""
    configured = a2a_peers_setting()
    entry = configured.get(name) if isinstance(configured, dict) else None
    if entry is None:
        raise InvalidMeshConfig(f"No A2A peer called {name!r} in MESH_A2A_PEERS.")
    problem = _entry_problem(name, entry)
    if problem is not None:
        raise InvalidMeshConfig(problem)
    token = None
    if entry.get("token_env"):
        token = os.environ.get(entry["token_env"])
        if not token:
            raise InvalidMeshConfig(
                f"MESH_A2A_PEERS[{name!r}]: the environment variable {entry['token_env']} "
                "(its token_env) is not set."
            )
    # Here, not at the top: the system checks read the setting above, and the A2A SDK
    # (protobuf, gRPC, Starlette) was 0.15 s of every command's start.
    from mesh.a2a import A2APeerConfig

    config = A2APeerConfig(
        mesh_id=name,
        card_url=entry["card_url"],
        token=token,
        timeout=float(entry.get("timeout_seconds", DEFAULT_TIMEOUT)),
        description=entry.get("description") or None,
        chats=entry.get("chats", False),
    )
    return config, entry.get("transport", DEFAULT_ALIAS)


# -- the database transport: the peer's inbox ------------------------------------------------


def _ensure_inbox(mesh_id: str, title: str) -> None:
    try:
        session_create(session_id=mesh_session_id(mesh_id), title=f"Mesh inbox of {title}")
    except DuplicateSession:
        pass


def _unanswered(mesh_id: str) -> list[IncomingMeshMessage]:
    """The direct messages delivered to the peer that it has not answered yet, oldest first."""
    bodies = (
        MeshDelivery.objects.filter(
            recipient=mesh_id,
            kind=MeshDelivery.Kind.DIRECT,
            inbox_item__status=InboxItem.Status.RESOLVED,
        )
        .order_by("pk")
        .values_list("body", flat=True)
    )
    return [IncomingMeshMessage.from_dict(body) for body in bodies]


def _mark_answered(mesh_id: str, message_id: str) -> None:
    key = (
        MeshDelivery.objects.filter(message_id=message_id, recipient=mesh_id)
        .values_list("inbox_item__key", flat=True)
        .first()
    )
    if key is None:
        return
    try:
        inbox_item_update(
            session_id=mesh_session_id(mesh_id),
            item_id=key,
            updates={"status": "consumed"},
            resolved_by="mesh",
        )
    except (InboxItemNotFound, InboxTransitionError):
        pass  # consumed already (answered twice, or read in the admin): nothing to do


async def start_peer(name: str) -> A2APeer:
    """Put the configured peer `name` on its transport's mesh (it answers from then on)."""
    config, alias = peer_config(name)
    transport = get_mesh_transport(alias)
    if isinstance(transport, InProcessMeshTransport):
        raise InvalidMeshConfig(
            "run_a2a_peers needs a mesh transport between processes: set MESH_TRANSPORT="
            "database or redis (or start an A2APeer in the process that runs the agents)."
        )
    on_database = isinstance(transport, DatabaseMeshTransport)
    on_answered = None
    if on_database:
        ensure = sync_to_async(healing(_ensure_inbox))
        await retry_while_unreachable(f"A2A peer {name}", lambda: ensure(name, name))
        mark = sync_to_async(healing(_mark_answered))

        async def on_answered(message: IncomingMeshMessage) -> None:
            await mark(name, message.id)

    from mesh.a2a import A2APeer

    peer = A2APeer(config, transport.adapter(name), on_answered=on_answered)
    await peer.start()
    if on_database:
        # What arrived while no peer ran for it (and what it took but did not answer).
        for message in await sync_to_async(healing(_unanswered))(name):
            await peer.handle(message)
    return peer


async def run_a2a_peers(
    names: Sequence[str] = (),
    *,
    stop: asyncio.Event,
    on_ready: Callable[[A2APeer], None] | None = None,
) -> list[str]:
    """Keep the named peers (every configured one by default) on the mesh until `stop`."""
    configured = a2a_peers_setting()
    wanted = list(names) or (list(configured) if isinstance(configured, dict) else [])
    if not wanted:
        raise InvalidMeshConfig("MESH_A2A_PEERS configures no A2A peer.")
    for name in wanted:
        peer_config(name)  # every one configured right before any starts
    peers: list[A2APeer] = []
    try:
        for name in wanted:
            peer = await start_peer(name)
            peers.append(peer)
            if on_ready is not None:
                on_ready(peer)
        await stop.wait()
    finally:
        # Stay registered: on a durable transport, messages sent meanwhile wait.
        for peer in peers:
            await peer.stop()
        for alias in {peer_config(name)[1] for name in wanted}:
            await get_mesh_transport(alias).close()
    return [peer.config.mesh_id for peer in peers]
