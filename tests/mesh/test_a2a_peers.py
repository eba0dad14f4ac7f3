"""A Glove agent and an A2A agent built with a2a-sdk's own server talk both ways through the mesh.

The A2A agent ("x", `tests.mesh.a2a_agent`) runs in a process of its own on a free port.
`A2APeer` stands on the mesh for it: agent g's `glove_mesh_send_message` to "x" reaches it
as an A2A message, and its answer lands in g's inbox as x's reply, which resolves g's
blocking wait and wakes g (`serve_mesh_peer`) for a turn that reads it. The other way, x
asks the server's coffee agent over A2A (a2a-sdk's client, our API token) and answers g
with what it said.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gloveapp.core import Message
from mesh.a2a import A2APeer, A2APeerConfig
from mesh.core import AgentIdentity, mesh_mount_of, mount_mesh, unmount_mesh
from mesh.core.peer import serve_mesh_peer
from mesh.transports.inprocess import InProcessMeshTransport
from tests.api.liveserver import LiveServer, free_port
from tests.core.support import calls
from tests.mesh.support import call_tool, eventually, items, make_agent

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
X_TOKEN = "x-secret-token"


class AgentX:
    """`python -m tests.mesh.a2a_agent PORT` until the test module is done."""

    def __init__(self, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.card_url = f"{self.url}/.well-known/agent-card.json"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.mesh.a2a_agent", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "X_TOKEN": X_TOKEN, "PYTHONUNBUFFERED": "1", **env},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.card_url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the A2A agent did not start")
            time.sleep(0.1)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def agent_x():
    x = AgentX()
    yield x
    x.close()


def send(content: str, *, blocking: bool = True, in_reply_to: str | None = None) -> Message:
    args = {"to": "x", "content": content, "blocking": blocking}
    if in_reply_to:
        args["in_reply_to"] = in_reply_to
    return calls(("glove_mesh_send_message", args))


def inbox_banner(model, call: int) -> str:
    return next(
        m.text
        for m in model.calls[call].messages
        if m.sender == "user" and m.text.startswith("[Inbox:")
    )


class Mesh:
    """An in-process mesh with agent g (scripted) and x, the A2A agent's peer."""

    def __init__(
        self,
        card_url: str,
        *,
        token: str | None = X_TOKEN,
        timeout: float = 60,
        transport: Any = None,
    ):
        self.transport = transport or InProcessMeshTransport()
        self.config = A2APeerConfig(mesh_id="x", card_url=card_url, token=token, timeout=timeout)
        self.peer = A2APeer(self.config, self.transport.adapter("x"))

    async def g(self, script):
        glove, model, store = make_agent("g", script)
        await mount_mesh(glove, adapter=self.transport.adapter("g"), identity=G)
        return glove, model, store

    async def replies(self, store, count: int):
        return await eventually(lambda: _replies(store, count), timeout=60)


async def _replies(store, count: int):
    found = await items(store, tag="mesh:from:x")
    return found if len(found) >= count else None


G = AgentIdentity(id="g", name="Agent G", description="ours")


async def test_a_blocking_send_reaches_the_a2a_agent_and_its_answer_wakes_the_sender(agent_x):
    mesh = Mesh(agent_x.card_url)
    identity = await mesh.peer.start()
    assert (identity.id, identity.name) == ("x", "Agent X")
    assert {"a2a", "echo", "sizes"} <= set(identity.capabilities)
    assert "Says what it heard" in identity.description
    glove, model, store = await mesh.g([send("hello X"), "Waiting for X.", "X answered; done."])
    try:
        listed = await call_tool(glove, "glove_mesh_list_agents", {})
        [x] = listed.data["agents"]
        assert (x["id"], x["name"]) == ("x", "Agent X") and "echo" in x["capabilities"]

        await glove.process_request("Say hello to X and wait")
        [waiting] = await items(store, blocking=True)
        [reply] = await mesh.replies(store, 1)
        msg_id = waiting.tag.removeprefix("mesh:waiting:")
        assert re.fullmatch(r'X heard "hello X" \(message \d+ of context \S+\)', reply.response)
        assert reply.request.startswith('Message from "Agent X" (x) [message id: msg_x_')
        assert reply.request.endswith(f"(replying to {msg_id})")
        [resolved] = await items(store, tag=waiting.tag)
        assert resolved.status == "resolved" and resolved.response == reply.response

        # The reply woke g: its wake-up turn reads it.
        turns = await asyncio.wait_for(serve_mesh_peer(mesh_mount_of(glove), max_turns=1), 60)
        assert turns == 1
        assert 'X heard "hello X"' in inbox_banner(model, 2)
    finally:
        await unmount_mesh(glove)
        await mesh.peer.stop()


@pytest.mark.redis
async def test_over_redis_the_answer_comes_back_as_the_peers_reply(agent_x, redis_url):
    import redis.asyncio as aioredis

    from mesh.transports.redis_pubsub import RedisMeshTransport

    raw = aioredis.Redis.from_url(redis_url)
    await raw.flushdb()
    await raw.aclose()
    mesh = Mesh(agent_x.card_url, transport=RedisMeshTransport(url=redis_url))
    await mesh.peer.start()
    glove, _, store = await mesh.g([send("over redis"), "ok"])
    try:
        await glove.process_request("Say it over Redis")
        [reply] = await mesh.replies(store, 1)
        assert reply.response.startswith('X heard "over redis"')
        [waiting] = await items(store, blocking=True)
        assert waiting.status == "resolved"
    finally:
        await unmount_mesh(glove)
        await mesh.peer.stop(unregister=True)
        await mesh.transport.close()


async def test_one_sender_is_one_conversation_and_an_input_required_task_is_answered(agent_x):
    mesh = Mesh(agent_x.card_url)
    await mesh.peer.start()
    glove, _, store = await mesh.g([send("first"), "ok", send("second"), "ok"])
    try:
        await glove.process_request("one")
        await glove.process_request("two")
        said = {r.response.split('"')[1]: r.response for r in await mesh.replies(store, 2)}
        first = re.search(r"\(message (\d+) of context (\S+)\)", said["first"]).groups()
        second = re.search(r"\(message (\d+) of context (\S+)\)", said["second"]).groups()
        # The same context, the next message in it (the context is derived from the sender:
        # the earlier test's peer, gone since, used it too).
        assert second == (str(int(first[0]) + 1), first[1])

        asking, _, asking_store = await mesh.g([])
        await call_tool(asking, "glove_mesh_send_message", {"to": "x", "content": "need input"})
        [question] = await mesh.replies(asking_store, 1)
        assert question.response.startswith('The A2A agent "Agent X" asks (input required): ')
        assert "Which size?" in question.response
        question_id = re.search(r"message id: (msg_x_\S+)\]", question.request).group(1)
        await call_tool(
            asking,
            "glove_mesh_send_message",
            {"to": "x", "content": "large", "in_reply_to": question_id},
        )
        answered = await mesh.replies(asking_store, 2)
        assert {r.response for r in answered} >= {"X got the answer: large"}
    finally:
        await unmount_mesh(glove)
        await mesh.peer.stop()


async def test_failed_auth_required_refused_and_unreachable_come_back_as_replies(agent_x):
    mesh = Mesh(agent_x.card_url)
    await mesh.peer.start()
    glove, _, store = await mesh.g([])
    wrong_peer = A2APeer(
        A2APeerConfig(mesh_id="x2", card_url=agent_x.card_url, token="wrong"),
        mesh.transport.adapter("x2"),
    )
    closed = f"http://127.0.0.1:{free_port()}/.well-known/agent-card.json"
    gone = A2APeer(A2APeerConfig(mesh_id="gone", card_url=closed), mesh.transport.adapter("gone"))
    try:
        await wrong_peer.start()
        identity = await gone.start()
        assert identity.id == "gone" and "could not be read yet" in identity.description
        for content in ("fail now", "auth please"):
            await call_tool(
                glove, "glove_mesh_send_message", {"to": "x", "content": content, "blocking": True}
            )
        for to in ("x2", "gone"):
            await call_tool(
                glove, "glove_mesh_send_message", {"to": to, "content": "hi", "blocking": True}
            )
        answers = await eventually(lambda: _all_answered(store, 4), timeout=60)
        by_sender = {}
        for item in answers:
            by_sender.setdefault(item.tag, []).append(item.response)
        failed, auth = sorted(by_sender["mesh:from:x"], key=lambda t: "authentication" in t)
        assert failed == 'The A2A agent "Agent X" failed the task: X cannot do that.'
        assert auth.startswith('The A2A agent "Agent X" needs authentication')
        assert "Sign in to X first." in auth
        [refused] = by_sender["mesh:from:x2"]
        assert refused.startswith('The A2A agent "Agent X" refused our credentials (HTTP Error 401')
        [unreachable] = by_sender["mesh:from:gone"]
        assert unreachable.startswith(f'The A2A agent "gone" cannot be reached at {closed}: ')
        # Every blocking send was answered: nothing waits.
        assert not await items(store, status="pending")
    finally:
        await unmount_mesh(glove)
        for peer in (mesh.peer, wrong_peer, gone):
            await peer.stop()


async def _all_answered(store, count: int):
    found = [i for i in await items(store) if i.tag.startswith("mesh:from:")]
    return found if len(found) >= count else None


# -- the other way: the A2A agent asks our agents ----------------------------------------------


@pytest.fixture(scope="module")
def shop():
    with LiveServer() as server:
        server.manage("setup_demo")
        server.start_worker()
        yield server


async def test_the_a2a_agent_asks_our_coffee_agent_with_our_token_and_answers_through_the_mesh(
    shop,
):
    token = shop.token_for("agent-x")
    x = AgentX(GLOVE_URL=shop.url, GLOVE_TOKEN=token)
    x_without = AgentX(GLOVE_URL=shop.url, GLOVE_TOKEN="not-a-token")
    mesh = Mesh(x.card_url)
    other = A2APeer(
        A2APeerConfig(mesh_id="y", card_url=x_without.card_url, token=X_TOKEN),
        mesh.transport.adapter("y"),
    )
    try:
        await mesh.peer.start()
        await other.start()
        glove, _, store = await mesh.g([send("ask glove: Do you have Kenya AA?"), "ok"])
        await glove.process_request("Ask X to ask the shop")
        [reply] = await mesh.replies(store, 1)
        assert reply.response.startswith("Glove says: ")
        assert "Kenya AA" in reply.response
        [waiting] = await items(store, blocking=True)
        assert waiting.status == "resolved"

        await call_tool(
            glove, "glove_mesh_send_message", {"to": "y", "content": "ask glove: hello"}
        )
        [refused] = await eventually(lambda: items(store, tag="mesh:from:y"), timeout=60)
        assert refused.response.startswith('The A2A agent "Agent X" failed the task: ')
        assert "401" in refused.response
        await unmount_mesh(glove)
    finally:
        await mesh.peer.stop()
        await other.stop()
        x.close()
        x_without.close()


# -- `manage.py run_a2a_peers`, on the database transport ---------------------------------------


def database_url() -> str:
    from django.db import connections

    config = connections["default"].settings_dict
    if config["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{config['NAME']}"
    return f"postgres://{config['USER']}@{config['HOST']}:{config['PORT']}/{config['NAME']}"


class PeersCommand:
    """`manage.py run_a2a_peers x` on the test's database (tests.mesh.a2a_settings)."""

    def __init__(self, card_url: str) -> None:
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.mesh.a2a_settings",
            "DATABASE_URL": database_url(),
            "MESH_TRANSPORT": "database",
            "X_CARD_URL": card_url,
            "X_PEER_TOKEN": X_TOKEN,
            "PYTHONUNBUFFERED": "1",
        }
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, *names: str) -> asyncio.subprocess.Process:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            "run_a2a_peers",
            *names,
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return self.process

    async def says(self) -> str:
        assert self.process is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        return line.decode().strip()

    async def stop(self) -> str:
        assert self.process is not None
        self.process.terminate()
        out, err = await asyncio.wait_for(self.process.communicate(), 30)
        self.log = err.decode()
        return out.decode().strip()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_run_a2a_peers_keeps_the_agent_on_the_database_mesh_and_answers_what_waited(
    agent_x, settings
):
    from asgiref.sync import sync_to_async
    from django.db import connections

    from mesh.layers import mesh_transports
    from mesh.transports.database import DatabaseMeshTransport, mesh_store

    transport = DatabaseMeshTransport(poll_interval=0.01)
    command = PeersCommand(agent_x.card_url)
    glove = None
    try:
        unknown = await command.start("x", "nobody")
        _, err = await asyncio.wait_for(unknown.communicate(), 60)
        assert unknown.returncode == 1
        assert "No A2A peer called 'nobody' in MESH_A2A_PEERS." in err.decode()

        await command.start("x")
        assert await command.says() == (
            f"x: on the mesh for the A2A agent 'Agent X' ({agent_x.card_url}, its card read), "
            "waiting."
        )
        store = mesh_store("g")
        glove, _, _ = make_agent("g", [send("over the database"), "ok"], store=store)
        await mount_mesh(glove, adapter=transport.adapter("g"), identity=G)
        listed = await call_tool(glove, "glove_mesh_list_agents", {"filter": {"capability": "a2a"}})
        assert [(a["id"], a["name"]) for a in listed.data["agents"]] == [("x", "Agent X")]

        await glove.process_request("Say it over the database")
        [reply] = await eventually(lambda: items(store, tag="mesh:from:x"), timeout=60)
        assert reply.response.startswith('X heard "over the database"')
        [waiting] = await items(store, blocking=True)
        assert waiting.status == "resolved"

        # Away: the message waits in x's inbox, and the peer answers it once started again.
        assert await command.stop() == "stopped: x.", command.log
        await call_tool(
            glove, "glove_mesh_send_message", {"to": "x", "content": "while away", "blocking": True}
        )
        await command.start("x")
        await command.says()
        answered = await eventually(lambda: _replies(store, 2), timeout=60)
        assert sorted(r.response.split('"')[1] for r in answered) == [
            "over the database",
            "while away",
        ]
        assert not await items(store, status="pending")
        # Each answered message is marked read in x's inbox (after its answer went back).
        await eventually(lambda: _all_read(mesh_store("x")), timeout=30)
    finally:
        if glove is not None:
            await unmount_mesh(glove)
        if command.process is not None and command.process.returncode is None:
            await command.stop()
        mesh_transports.reset()
        await sync_to_async(connections.close_all)()


async def _all_read(store) -> bool:
    return {item.status for item in await items(store)} == {"consumed"}


# -- end to end: a configured agent whose turns run on a worker asks the A2A agent ----------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_a_configured_agent_on_a_worker_asks_the_a2a_agent_and_its_wake_up_turn_answers(
    agent_x, requires_postgres
):
    """a -> g (run_agent g; turns on a turn worker) -> x (run_a2a_peers) -> g woken by x's
    answer -> a: x's answer reaches a as g's reply, through two turns of g on the worker."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from gloveapp.turns.models import Turn
    from mesh.layers import mesh_transports
    from mesh.transports.database import DatabaseMeshTransport, mesh_store

    transport = DatabaseMeshTransport(poll_interval=0.01)
    peers = PeersCommand(agent_x.card_url)
    others: list[asyncio.subprocess.Process] = []

    async def start(*args: str, read: bool = False) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            *args,
            cwd=ROOT,
            env={**peers.env, "GLOVE_TASKS_BACKEND": "db"},
            stdout=asyncio.subprocess.PIPE if read else asyncio.subprocess.DEVNULL,
        )
        others.append(process)
        return process

    a = None
    try:
        await peers.start("x")
        await peers.says()
        g = await start("run_agent", "g", "--mesh-id", "g", read=True)
        assert (await asyncio.wait_for(g.stdout.readline(), 60)).decode().strip() == (
            "g: on the mesh, waiting."
        )
        await start("turn_worker", "--worker-id", "a2a-worker")
        store_a = mesh_store("a")
        a, _, _ = make_agent(
            "a",
            [
                calls(("glove_mesh_send_message", {"to": "g", "content": "hi", "blocking": True})),
                "ok",
            ],
            store=store_a,
        )
        identity = AgentIdentity(id="a", name="Agent A", description="the test's")
        await mount_mesh(a, adapter=transport.adapter("a"), identity=identity)
        await a.process_request("Ask g")
        [waiting] = await items(store_a, blocking=True)

        [answer] = await eventually(lambda: items(store_a, tag="mesh:from:g"), timeout=120)
        assert re.fullmatch(r'X says: X heard "hi" \(message \d+ of context \S+\)', answer.response)
        assert answer.request.endswith(f"(replying to {waiting.tag.removeprefix('mesh:waiting:')})")
        [resolved] = await items(store_a, tag=waiting.tag)
        assert resolved.status == "resolved"

        # Both of g's turns ran on the worker: the one a's message woke, the one x's answer woke.
        async def g_turns():
            turns = [
                turn
                async for turn in Turn.objects.filter(session_id="mesh:g")
                .order_by("pk")
                .values_list("source", "status", "worker_id")
            ]
            return turns if turns[:2] == [("mesh", "done", "a2a-worker")] * 2 else None

        await eventually(g_turns, timeout=60)
    finally:
        if a is not None:
            await unmount_mesh(a)
        for process in others:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 15)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        if peers.process is not None and peers.process.returncode is None:
            await peers.stop()
        mesh_transports.reset()
        await sync_to_async(connections.close_all)()
