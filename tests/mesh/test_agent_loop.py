"""Case 24 of §9.7: two real agent loops with scripted models talk over each transport."""

from __future__ import annotations

import re

from gloveapp.core import Message
from tests.core.support import calls
from tests.mesh.support import A, B, eventually, items


def ack_what_the_inbox_says(note: str):
    """B's first turn: acknowledge the message id its injected inbox banner names."""

    def turn(prompt: list[Message]) -> Message:
        banner = next(m.text for m in prompt if m.sender == "user" and m.text.startswith("[Inbox:"))
        message_id = re.search(r"\[message id: (msg_[^\]]+)\]", banner).group(1)
        return calls(("glove_mesh_acknowledge", {"message_id": message_id, "note": note}))

    return turn


async def test_a_blocking_send_is_seen_acked_and_surfaced_through_both_agent_loops(mesh):
    send = calls(("glove_mesh_send_message", {"to": "b", "content": "hello B", "blocking": True}))
    a, model_a, store_a = mesh.agent("a", [send, "Sent. Waiting for B.", "Acknowledged. Done."])
    b, model_b, store_b = mesh.agent("b", [ack_what_the_inbox_says("ack from B"), "Done."])
    await mesh.mount(a, A)
    await mesh.mount(b, B)

    await a.process_request("Send a hello to B blocking")
    assert len(model_a.calls) == 2
    [waiting] = await items(store_a, status="pending")
    msg_id = waiting.tag.removeprefix("mesh:waiting:")
    assert waiting.tag.startswith("mesh:waiting:msg_a_")
    [incoming] = await eventually(lambda: items(store_b))
    assert (incoming.status, incoming.tag, incoming.response) == (
        "resolved",
        "mesh:from:a",
        "hello B",
    )

    await b.process_request("Check your inbox")
    assert len(model_b.calls) == 2
    banner = next(
        m.text
        for m in model_b.calls[0].messages
        if m.sender == "user" and m.text.startswith("[Inbox:")
    )
    assert "[Inbox: 1 item(s) resolved]" in banner
    assert "hello B" in banner and "mesh:from:a" in banner
    [consumed] = await items(store_b)
    assert consumed.status == "consumed"

    [resolved] = await eventually(lambda: items(store_a, tag=waiting.tag, status="resolved"))
    assert resolved.response == "ack from B"
    await a.process_request("Continue")
    assert len(model_a.calls) == 3
    third_prompt = [m.text for m in model_a.calls[2].messages]
    assert any(
        text.startswith("[Inbox:") and f"mesh:waiting:{msg_id}" in text and "ack from B" in text
        for text in third_prompt
    )
    [done] = await items(store_a)
    assert done.status == "consumed"


async def test_a_pending_wait_shows_the_blocking_reminder_on_the_next_ask(mesh):
    send = calls(("glove_mesh_send_message", {"to": "b", "content": "ping", "blocking": True}))
    a, model_a, _ = mesh.agent("a", [send, "sent", "still waiting"])
    b, _, _ = mesh.agent("b")
    await mesh.mount(a, A)
    await mesh.mount(b, B)
    await a.process_request("ping b and wait")
    await a.process_request("anything yet?")
    last = model_a.calls[-1].messages[-1].text
    assert last.startswith("[Inbox: 1 blocking item(s) still pending")
    assert 'Waiting for response from "Agent B" (b)' in last
