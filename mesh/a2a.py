"""An external A2A agent as a mesh peer: `A2APeer` stands on the mesh for it.

    config = A2APeerConfig(mesh_id="x", card_url="https://x.example/.well-known/agent-card.json",
                           token=token)   # the caller reads it from the environment
    peer = A2APeer(config, adapter=transport.adapter("x"))
    await peer.start()   # reads the card, registers "x" (its name, description, skills)
    ...
    await peer.stop()

What a mesh agent sends to "x" goes to the A2A agent as an A2A message (the official
`a2a-sdk` client, the card's JSON-RPC or HTTP+JSON interface, `Authorization: Bearer
<token>`), and its answer comes back to the sender as a mesh message from "x" replying to it
(`in_reply_to`): it lands in the sender's inbox, resolves a blocking send's wait and wakes
the sender as any peer's reply does. Each sender is one A2A conversation: its messages share
a `contextId`. Whatever goes wrong (the agent unreachable, our token refused, a failed,
rejected or cancelled task, one that needs authentication, one still running after
`timeout` seconds) comes back the same way, as a reply that says so, so no sender waits
forever. A task that asks for input (`input-required`) comes back as the question; the
sender's next message to "x" (or its reply to the question) answers that task.

Broadcasts and acknowledgements are not forwarded: an A2A agent is asked only directly.
Django-free: the Django side (`mesh.a2a_peers`) reads the setting and runs the peers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest, Task
from a2a.types import TaskState as S
from google.protobuf.json_format import MessageToDict

from mesh.core.adapter import MeshAdapter, Unsubscribe
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, new_message_id

logger = logging.getLogger("mesh")

BINDINGS = ["JSONRPC", "HTTP+JSON"]
POLL_SECONDS = 0.5
SEEN_CAPACITY = 4096
STOP_GRACE_SECONDS = 10.0
CONTEXT_NAMESPACE = uuid.UUID("5c0e8f5e-8a31-4d7e-9d55-2f0a6f7d3c11")
ENDED = {S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED, S.TASK_STATE_REJECTED}
ASKING = {S.TASK_STATE_INPUT_REQUIRED, S.TASK_STATE_AUTH_REQUIRED}
STATE_WORDS = {
    S.TASK_STATE_FAILED: "failed",
    S.TASK_STATE_CANCELED: "cancelled",
    S.TASK_STATE_REJECTED: "rejected",
}


@dataclass(slots=True)
class A2APeerConfig:
    mesh_id: str
    card_url: str
    token: str | None = None
    timeout: float = 120.0
    description: str | None = None
    # Whether chats on the mesh (GLOVE_CHAT_MESH, database transport) may reach it.
    chats: bool = False


def card_identity(config: A2APeerConfig, card: AgentCard) -> AgentIdentity:
    """The mesh's view of an A2A agent: the card's name and description, a capability per
    skill (its id and tags), and in `metadata` that it is one (and whether chats reach it)."""
    capabilities: list[str] = ["a2a"]
    for skill in card.skills:
        for tag in [skill.id, *skill.tags]:
            if tag and tag not in capabilities:
                capabilities.append(tag)
    skills = [f"{skill.name or skill.id}: {skill.description}" for skill in card.skills]
    text = config.description or card.description or card.name
    if skills:
        text += " Skills: " + "; ".join(skills) + "."
    return AgentIdentity(
        id=config.mesh_id,
        name=card.name or config.mesh_id,
        description=text,
        capabilities=capabilities,
        metadata={"a2a": {"card": card.name, "version": card.version, "chats": config.chats}},
    )


def parts_text(parts: Any) -> str:
    """A message's or artifact's parts as text: text parts as they are, data parts as JSON."""
    out = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            out.append(part.text)
        elif kind == "data":
            out.append(json.dumps(MessageToDict(part.data)))
        elif kind == "url":
            out.append(part.url)
    return "\n".join(out)


def task_text(task: Task) -> str:
    """What a task says: its artifacts' text, else its status message's."""
    text = "\n".join(parts_text(artifact.parts) for artifact in task.artifacts).strip()
    return text or parts_text(task.status.message.parts).strip()


def failure_text(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.splitlines()[0]


class A2APeer:
    """One A2A agent on the mesh, through `adapter` (the mesh agent whose id it answers as)."""

    def __init__(
        self,
        config: A2APeerConfig,
        adapter: MeshAdapter,
        *,
        http: httpx.AsyncClient | None = None,
        on_answered: Callable[[IncomingMeshMessage], Awaitable[None]] | None = None,
    ) -> None:
        """`on_answered` is called with each message once its answer went back (the
        database side marks it read there, so a restarted peer forwards only the rest)."""
        self.config = config
        self.adapter = adapter
        self.on_answered = on_answered
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(headers=headers, timeout=config.timeout)
        self.card: AgentCard | None = None
        self._client: Any = None
        self._unsubscribe: Unsubscribe | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._contexts: dict[str, str] = {}
        # sender -> the task that asked it something (input-required), answered next.
        self._asking: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.identity = AgentIdentity(
            id=config.mesh_id,
            name=config.mesh_id,
            description=config.description
            or f"An A2A agent at {config.card_url} (its card could not be read yet).",
            capabilities=["a2a"],
            metadata={"a2a": {"card": None, "version": None, "chats": config.chats}},
        )

    @property
    def name(self) -> str:
        return self.identity.name

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> AgentIdentity:
        """Read the card (an unreachable agent is registered all the same, under its mesh
        id: what is sent to it is answered with why it cannot be reached), subscribe, then
        register."""
        try:
            await self._connect()
        except Exception as error:
            logger.warning(
                "[glove-mesh] A2A peer %s: card at %s unreadable: %s",
                self.config.mesh_id,
                self.config.card_url,
                failure_text(error),
            )
        self._unsubscribe = await self.adapter.subscribe(self.handle)
        await self.adapter.register(self.identity)
        return self.identity

    async def stop(self, *, unregister: bool = False, grace: float = STOP_GRACE_SECONDS) -> None:
        """Stop taking messages; the answers under way get `grace` seconds to go back (and
        be marked answered) before they are cancelled."""
        if self._unsubscribe is not None:
            await self._unsubscribe()
            self._unsubscribe = None
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if unregister:
            await self.adapter.unregister()
        if self._own_http:
            await self.http.aclose()

    async def _connect(self) -> Any:
        if self._client is not None:
            return self._client
        resolver = A2ACardResolver(self.http, self.config.card_url, agent_card_path="")
        card = await resolver.get_agent_card()
        config = ClientConfig(
            httpx_client=self.http, streaming=False, supported_protocol_bindings=BINDINGS
        )
        self._client = ClientFactory(config).create(card)
        self.card = card
        self.identity = card_identity(self.config, card)
        if self._unsubscribe is not None:
            # Read late (it was unreachable when the peer started): listed as it is now.
            await self.adapter.register(self.identity)
        return self._client

    # -- the mesh side ---------------------------------------------------------------------
    async def handle(self, message: IncomingMeshMessage) -> None:
        """Forward a direct message, in a task of its own (a slow agent holds up no one)."""
        if message.kind != "direct" or message.from_ == self.config.mesh_id:
            return
        if message.id in self._seen:
            return  # handed over twice (a restarted peer's backlog overlaps its subscription)
        self._seen[message.id] = None
        while len(self._seen) > SEEN_CAPACITY:
            self._seen.popitem(last=False)
        task = asyncio.create_task(self._answer(message), name=f"a2a-{self.config.mesh_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, message: IncomingMeshMessage) -> None:
        lock = self._locks.setdefault(message.from_, asyncio.Lock())
        async with lock:  # one conversation at a time per sender, in order
            try:
                text, a2a = await self.forward(message)
            except Exception as error:
                logger.exception("[glove-mesh] A2A peer %s:", self.config.mesh_id)
                text, a2a = self._unreachable(error), {"state": "unreachable"}
            reply = MeshMessage(
                id=new_message_id(self.config.mesh_id),
                from_=self.config.mesh_id,
                to=message.from_,
                in_reply_to=message.id,
                content=text,
                metadata={"a2a": a2a},
            )
            try:
                await self.adapter.send(reply)
                if self.on_answered is not None:
                    await self.on_answered(message)
            except Exception:
                logger.exception(
                    "[glove-mesh] A2A peer %s could not reply to %s:",
                    self.config.mesh_id,
                    message.from_,
                )

    def context_of(self, sender: str) -> str:
        """The A2A conversation of a mesh sender: the same `contextId` for all its messages
        (derived, so it survives a restart; the one the agent answered with wins)."""
        known = self._contexts.get(sender)
        if known is None:
            seed = f"{self.config.card_url}\n{self.config.mesh_id}\n{sender}"
            known = self._contexts[sender] = str(uuid.uuid5(CONTEXT_NAMESPACE, seed))
        return known

    async def forward(self, message: IncomingMeshMessage) -> tuple[str, dict[str, Any]]:
        """Send `message` to the A2A agent and wait for its answer: the reply's text and
        what it was (`taskId`, `contextId`, `state`)."""
        try:
            client = await self._connect()
        except Exception as error:
            return self._unreachable(error), {"state": "unreachable"}
        sender = message.from_
        task_id = self._asking.pop(sender, "")
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=message.id,
                context_id=self.context_of(sender),
                task_id=task_id,
                parts=[Part(text=message.content)],
            )
        )
        request.message.metadata.update({"meshFrom": sender, "meshMessageId": message.id})
        try:
            answer = await asyncio.wait_for(self._send(client, request), self.config.timeout)
        except TimeoutError:
            return (
                f'The A2A agent "{self.name}" did not answer within {self.config.timeout:g} s.',
                {"state": "timeout"},
            )
        except Exception as error:
            text, delivered = self._refused(error)
            if task_id and not delivered:
                self._asking[sender] = task_id  # the question still waits for its answer
            return text, {"state": "error"}
        if isinstance(answer, Message):
            return parts_text(answer.parts) or "(no text)", {
                "contextId": answer.context_id,
                "state": "message",
            }
        if answer.context_id:
            self._contexts[sender] = answer.context_id
        return self._task_reply(sender, answer)

    async def _send(self, client: Any, request: SendMessageRequest) -> Task | Message:
        answer: Task | Message | None = None
        async for event in client.send_message(request):
            answer = event.task if event.HasField("task") else event.message
        if answer is None:
            raise ValueError("the agent answered nothing")
        if isinstance(answer, Message):
            return answer
        # A server that answered before the task ended: read it until it ends or asks.
        while answer.status.state not in ENDED | ASKING:
            await asyncio.sleep(POLL_SECONDS)
            answer = await client.get_task(GetTaskRequest(id=answer.id))
        return answer

    def _task_reply(self, sender: str, task: Task) -> tuple[str, dict[str, Any]]:
        state = task.status.state
        said = task_text(task)
        a2a = {"taskId": task.id, "contextId": task.context_id, "state": S.Name(state)}
        if state == S.TASK_STATE_COMPLETED:
            return said or "(no text)", a2a
        if state == S.TASK_STATE_INPUT_REQUIRED:
            self._asking[sender] = task.id
            return (
                f'The A2A agent "{self.name}" asks (input required): {said or "(no question)"}\n'
                "Your next message to it answers this."
            ), a2a
        if state == S.TASK_STATE_AUTH_REQUIRED:
            return (
                f'The A2A agent "{self.name}" needs authentication before it can go on '
                f"(auth-required): {said or '(no details)'}\nNothing sent over the mesh can "
                "provide it: its credentials are set where the peer is configured."
            ), a2a
        word = STATE_WORDS.get(state, S.Name(state))
        return f'The A2A agent "{self.name}" {word} the task: {said or "(no reason given)"}', a2a

    def _unreachable(self, error: BaseException) -> str:
        return (
            f'The A2A agent "{self.name}" cannot be reached at {self.config.card_url}: '
            f"{failure_text(error)}. Nothing was delivered."
        )

    def _refused(self, error: BaseException) -> tuple[str, bool]:
        """What to tell the sender of a send that failed, and whether the agent took the
        message at all (a refusal of the request itself, as opposed to not reaching it)."""
        text = failure_text(error)
        if "HTTP Error 401" in text or "HTTP Error 403" in text:
            return (
                f'The A2A agent "{self.name}" refused our credentials ({text}). Nothing was '
                "delivered; its token is set where the peer is configured."
            ), False
        if "Network communication error" in text or "timed out" in text:
            self._client = None  # read the card again next time: it may have moved
            return self._unreachable(error), False
        return f'The A2A agent "{self.name}" could not take the message: {text}', True
