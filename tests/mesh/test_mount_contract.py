"""The mount half of the conformance checklist (contract §9.7, cases 12-23), per transport,
plus what Decision 7 changes: mounting twice is harmless, unmount, late acks surface."""

from __future__ import annotations

import pytest

from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel
from mesh.core import MeshStoreUnsupportedError, mount_mesh, unmount_mesh
from tests.mesh.support import (
    A,
    B,
    C,
    Proxy,
    call_tool,
    eventually,
    items,
    mesh_tool_names,
    quiet_period,
)

MESH_TOOLS = [
    "glove_mesh_send_message",
    "glove_mesh_broadcast",
    "glove_mesh_list_agents",
    "glove_mesh_acknowledge",
]


async def pair(mesh):
    a, _, store_a = mesh.agent("a")
    b, _, store_b = mesh.agent("b")
    await mesh.mount(a, A)
    await mesh.mount(b, B)
    return a, store_a, b, store_b


class NoInboxStore:
    """A store with only the required methods."""

    identifier = "plain"

    def __init__(self):
        self._inner = MemoryStore("plain")
        for name in (
            "get_messages",
            "get_context_messages",
            "append_messages",
            "get_token_count",
            "add_tokens",
            "get_turn_count",
            "increment_turn",
            "reset_counters",
        ):
            setattr(self, name, getattr(self._inner, name))


async def test_it_refuses_a_store_without_an_inbox(mesh):  # case 12
    glove = Glove(
        store=NoInboxStore(),
        model=ScriptedModel([]),
        compaction_config=CompactionConfig("summarise"),
    ).build()
    with pytest.raises(MeshStoreUnsupportedError, match="does not implement inbox methods"):
        await mount_mesh(glove, adapter=mesh.adapter("a"), identity=A)


async def test_mounting_folds_the_four_tools_and_registers_the_identity(mesh):  # case 13
    a, _, _ = mesh.agent("a")
    mount = await mesh.mount(a, A)
    assert mesh_tool_names(a) == MESH_TOOLS
    assert await mount.adapter.get_agent("a") == A


async def test_a_non_blocking_send_lands_resolved_in_the_recipients_inbox(mesh):  # case 14
    a, store_a, _b, store_b = await pair(mesh)
    result = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "hi there"})
    assert result.status == "success"
    assert result.data["blocking"] is False and result.data["to"] == "b"
    [item] = await eventually(lambda: items(store_b))
    assert (item.status, item.tag, item.response) == ("resolved", "mesh:from:a", "hi there")
    assert 'Message from "Agent A" (a)' in item.request
    assert f"[message id: {result.data['message_id']}]" in item.request
    assert await items(store_a) == []


async def test_a_broadcast_lands_in_every_other_agents_inbox(mesh):  # case 15
    _a, store_a, b, store_b = await pair(mesh)
    result = await call_tool(b, "glove_mesh_broadcast", {"content": "team-wide ping"})
    assert result.status == "success" and result.data["blocking"] is False
    [item] = await eventually(lambda: items(store_a))
    assert (item.tag, item.response, item.status) == (
        "mesh:broadcast:from:b",
        "team-wide ping",
        "resolved",
    )
    await quiet_period()
    assert await items(store_b) == []


async def test_a_blocking_send_waits_until_the_ack_resolves_it(mesh):  # case 16
    a, store_a, b, store_b = await pair(mesh)
    result = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "do it", "blocking": True}
    )
    assert result.data["blocking"] is True
    msg_id = result.data["message_id"]
    [waiting] = await items(store_a)
    assert (waiting.status, waiting.blocking, waiting.tag) == (
        "pending",
        True,
        f"mesh:waiting:{msg_id}",
    )
    assert waiting.request == f'Waiting for response from "Agent B" (b) to message {msg_id}'
    await eventually(lambda: items(store_b))
    ack = await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "received"})
    assert ack.data == {"acknowledged": msg_id}
    await eventually(lambda: items(store_a, status="resolved"))
    [resolved] = await items(store_a)
    assert (resolved.id, resolved.response) == (waiting.id, "received")


async def test_a_reply_implies_an_ack(mesh):  # case 17
    a, store_a, b, store_b = await pair(mesh)
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "ok?", "blocking": True}
    )
    msg_id = sent.data["message_id"]
    await eventually(lambda: items(store_b))
    await call_tool(
        b, "glove_mesh_send_message", {"to": "a", "content": "all good", "in_reply_to": msg_id}
    )
    waiting = await eventually(
        lambda: items(store_a, tag=f"mesh:waiting:{msg_id}", status="resolved")
    )
    assert waiting[0].response == "all good"
    [reply] = await items(store_a, tag="mesh:from:b")
    assert (reply.status, reply.response) == ("resolved", "all good")
    assert reply.request.endswith(f"(replying to {msg_id})")


async def test_it_lists_other_agents_with_filters(mesh):  # case 18
    a, _, _ = mesh.agent("a")
    b, _, _ = mesh.agent("b")
    c, _, _ = mesh.agent("c")
    for glove, identity in ((a, A), (b, B), (c, C)):
        await mesh.mount(glove, identity)
    everyone = await call_tool(a, "glove_mesh_list_agents", {})
    assert everyone.data["count"] == 2
    assert sorted(agent["id"] for agent in everyone.data["agents"]) == ["b", "c"]
    assert {"id": "c", "name": "Gamma", "description": "third", "capabilities": ["research"]} in (
        everyone.data["agents"]
    )
    chat = await call_tool(a, "glove_mesh_list_agents", {"filter": {"capability": "chat"}})
    assert [agent["id"] for agent in chat.data["agents"]] == ["b"]
    gam = await call_tool(a, "glove_mesh_list_agents", {"filter": {"name_contains": "gam"}})
    assert [agent["id"] for agent in gam.data["agents"]] == ["c"]


async def test_a_failed_blocking_send_rolls_back_its_waiting_item(mesh):  # case 19
    a, _, store_a = mesh.agent("a")
    b, _, _ = mesh.agent("b")
    await mesh.mount(b, B)

    async def transport_down(_message):
        raise RuntimeError("transport down")

    await mesh.mount(a, A, adapter=Proxy(mesh.adapter("a"), send=transport_down))
    result = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "x", "blocking": True}
    )
    assert result.status == "error"
    assert "glove_mesh_send_message failed: transport down" in result.message
    assert await items(store_a, status="pending") == []
    [consumed] = await items(store_a, status="consumed")
    assert "Send failed: transport down" in consumed.response


async def test_mounting_twice_is_harmless(mesh):  # case 20, as Decision 7 has it
    a, _store_a, b, store_b = await pair(mesh)
    adapter = (await mesh.mount(b, B)).adapter
    again = await mount_mesh(b, adapter=adapter, identity=B)
    assert mesh_tool_names(b) == MESH_TOOLS
    assert again.adapter is adapter
    await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "once"})
    await eventually(lambda: items(store_b))
    await quiet_period()
    assert len(await items(store_b)) == 1


async def test_a_second_ack_does_not_change_the_resolution_and_surfaces_as_an_item(mesh):  # 21
    a, store_a, b, _store_b = await pair(mesh)
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "x", "blocking": True}
    )
    msg_id = sent.data["message_id"]
    first = await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "first"})
    await eventually(lambda: items(store_a, status="resolved"))
    second = await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "second"})
    assert (first.status, second.status) == ("success", "success")
    late = await eventually(lambda: items(store_a, tag="mesh:from:b"))
    [waiting] = await items(store_a, tag=f"mesh:waiting:{msg_id}")
    assert waiting.response == "first"
    # Decision 7: the late ack is not dropped, it arrives as an ordinary resolved item.
    assert (late[0].status, late[0].response) == ("resolved", "second")
    assert f"of message {msg_id}" in late[0].request


async def test_a_failing_registry_is_reported_by_list_agents(mesh):  # case 22
    a, _, _ = mesh.agent("a")

    async def registry_down():
        raise RuntimeError("registry down")

    await mesh.mount(a, A, adapter=Proxy(mesh.adapter("a"), list_agents=registry_down))
    result = await call_tool(a, "glove_mesh_list_agents", {})
    assert result.status == "error"
    assert result.message == "glove_mesh_list_agents failed: registry down"


async def test_a_store_that_cannot_record_the_wait_fails_the_blocking_send(mesh):  # case 23
    class FullDisk(type(mesh.store("a"))):
        async def add_inbox_item(self, item):
            raise OSError("disk full")

    a, _, _ = mesh.agent("a", store=FullDisk(mesh.store("a").identifier))
    b, _, store_b = mesh.agent("b")
    await mesh.mount(a, A)
    await mesh.mount(b, B)
    result = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "x", "blocking": True}
    )
    assert result.status == "error"
    assert result.message.startswith(
        "glove_mesh_send_message failed to record pending blocking item for msg_a_"
    )
    assert result.message.endswith("(to=b): disk full")
    await quiet_period()
    assert await items(store_b) == []


async def test_a_blocking_broadcast_resolves_on_the_first_ack_and_later_acks_surface(mesh):
    a, store_a, b, _ = await pair(mesh)
    c, _, _ = mesh.agent("c")
    await mesh.mount(c, C)
    sent = await call_tool(a, "glove_mesh_broadcast", {"content": "anyone?", "blocking": True})
    msg_id = sent.data["message_id"]
    [waiting] = await items(store_a)
    assert waiting.request == f"Broadcast {msg_id}: waiting for at least one acknowledgement"
    await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "b here"})
    await eventually(lambda: items(store_a, tag=f"mesh:waiting:{msg_id}", status="resolved"))
    await call_tool(c, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "c here"})
    [late] = await eventually(lambda: items(store_a, tag="mesh:from:c"))
    assert late.response == "c here"
    [resolved] = await items(store_a, tag=f"mesh:waiting:{msg_id}")
    assert resolved.response == "b here"


async def test_an_ack_after_the_sender_restarted_still_resolves_its_wait(mesh):
    # The sender's process restarts: a new Glove, a new adapter, the same (persistent) store.
    a, store_a, b, _store_b = await pair(mesh)
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "x", "blocking": True}
    )
    msg_id = sent.data["message_id"]
    await unmount_mesh(a)
    restarted, _, _ = mesh.agent("a", store=mesh.store("a"))
    await mesh.mount(restarted, A)
    await call_tool(b, "glove_mesh_acknowledge", {"message_id": msg_id, "note": "late but fine"})
    [waiting] = await eventually(lambda: items(store_a, status="resolved"))
    assert (waiting.tag, waiting.response) == (f"mesh:waiting:{msg_id}", "late but fine")


async def test_an_ack_for_a_non_blocking_send_is_dropped(mesh):
    a, store_a, b, _ = await pair(mesh)
    sent = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "fyi"})
    await call_tool(b, "glove_mesh_acknowledge", {"message_id": sent.data["message_id"]})
    await quiet_period()
    assert await items(store_a) == []


async def test_unmount_removes_the_tools_and_stops_delivery(mesh):
    a, _store_a, b, store_b = await pair(mesh)
    assert await unmount_mesh(b) is True
    assert mesh_tool_names(b) == []
    assert [t.name for t in b.tools] == ["glove_update_tasks", "glove_post_to_inbox"]
    result = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "still there?"})
    assert result.status == "error"
    assert result.message == 'glove_mesh_send_message failed: No agent with id "b".'
    assert await unmount_mesh(b) is False
    await quiet_period()
    assert await items(store_b) == []
