"""Signed messages and access rules, enforced by each transport (both off by default)."""

from __future__ import annotations

import pytest

from mesh.core import MeshAccessDeniedError, MeshMessage, new_message_id
from tests.mesh.support import (
    A,
    B,
    C,
    Recorder,
    call_tool,
    eventually,
    items,
    quiet_period,
)

KEYS = {"a": "secret-of-a", "b": "secret-of-b"}


async def test_signed_messages_between_agents_with_keys_are_delivered(signing_mesh):
    transport = signing_mesh.new_transport(signing_keys=KEYS)
    a, _, store_a = signing_mesh.agent("a")
    b, _, store_b = signing_mesh.agent("b")
    await signing_mesh.mount(a, A, adapter=transport.adapter("a"))
    await signing_mesh.mount(b, B, adapter=transport.adapter("b"))
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "signed", "blocking": True}
    )
    await eventually(lambda: items(store_b))
    await call_tool(b, "glove_mesh_acknowledge", {"message_id": sent.data["message_id"]})
    await eventually(lambda: items(store_a, status="resolved"))
    assert transport.guard.rejected == {}


async def test_a_receiver_drops_and_counts_a_message_whose_signature_does_not_verify(signing_mesh):
    honest = signing_mesh.new_transport(signing_keys=KEYS)
    # The forger knows the network but signs as "a" with the wrong secret.
    forger = signing_mesh.new_transport(signing_keys={"a": "guessed", "b": "guessed"})
    b, _, store_b = signing_mesh.agent("b")
    await signing_mesh.mount(b, B, adapter=honest.adapter("b"))
    if signing_mesh.kind == "inprocess":
        # In one process the network is the transport: the forger must share it to be heard.
        forger.network = honest.network
        forger.network.guard = honest.guard
        forged = forger.adapter("a")
        forged.network = _ForgingNetwork(honest.network, forger.guard)
    else:
        forged = forger.adapter("a")
    await forged.register(A)
    await forged.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="pay me"))
    await eventually(lambda: honest.guard.rejected["bad_signature"] == 1)
    await quiet_period()
    assert await items(store_b) == []


async def test_a_receiver_drops_unsigned_messages_and_forged_senders(signing_mesh):
    honest = signing_mesh.new_transport(signing_keys=KEYS)
    open_transport = signing_mesh.new_transport()
    if signing_mesh.kind == "inprocess":
        open_transport.network = honest.network
    listener = Recorder()
    b = honest.adapter("b")
    await b.register(B)
    await signing_mesh.subscribe(b, listener)
    unsigned = (
        open_transport.adapter("a") if signing_mesh.kind == "redis" else _unsigned(honest, "a")
    )
    await unsigned.register(A)
    await unsigned.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="x"))
    # "c" has no key at all: whatever it claims, it cannot be verified.
    stranger = (
        open_transport.adapter("c") if signing_mesh.kind == "redis" else _unsigned(honest, "c")
    )
    await stranger.register(C)
    await stranger.send(MeshMessage(id=new_message_id("c"), from_="c", to="b", content="y"))
    await eventually(
        lambda: (
            honest.guard.rejected["unsigned"] == 1 and honest.guard.rejected["unknown_signer"] == 1
        )
    )
    assert listener.received == []


async def test_access_rules_refuse_a_forbidden_send_and_allow_the_rest(mesh):
    transport = mesh.new_transport(access={"a": ["b"], "c": []})
    a, _, _ = mesh.agent("a")
    b, _, store_b = mesh.agent("b")
    c, _, store_c = mesh.agent("c")
    for glove, identity in ((a, A), (b, B), (c, C)):
        await mesh.mount(glove, identity, adapter=transport.adapter(identity.id))
    allowed = await call_tool(a, "glove_mesh_send_message", {"to": "b", "content": "ok"})
    refused = await call_tool(a, "glove_mesh_send_message", {"to": "c", "content": "no"})
    assert allowed.status == "success"
    assert refused.message == 'glove_mesh_send_message failed: Agent "a" may not message "c".'
    muted = await call_tool(c, "glove_mesh_send_message", {"to": "b", "content": "hi"})
    assert muted.status == "error"
    # b is not named in the rules: unrestricted.
    await call_tool(b, "glove_mesh_broadcast", {"content": "all"})
    await eventually(lambda: items(store_c))
    await eventually(lambda: items(store_b))
    assert [i.response for i in await items(store_b)] == ["ok"]


async def test_a_broadcast_reaches_only_the_agents_the_rules_allow(mesh):
    transport = mesh.new_transport(access={"a": ["b"]})
    a, _, _ = mesh.agent("a")
    b, _, store_b = mesh.agent("b")
    c, _, store_c = mesh.agent("c")
    for glove, identity in ((a, A), (b, B), (c, C)):
        await mesh.mount(glove, identity, adapter=transport.adapter(identity.id))
    await call_tool(a, "glove_mesh_broadcast", {"content": "just b"})
    await eventually(lambda: items(store_b))
    await quiet_period()
    assert await items(store_c) == []


async def test_an_acknowledgement_follows_the_access_rules_too(mesh):
    transport = mesh.new_transport(access={"b": []})
    a, _, _ = mesh.agent("a")
    b, _, store_b = mesh.agent("b")
    await mesh.mount(a, A, adapter=transport.adapter("a"))
    await mesh.mount(b, B, adapter=transport.adapter("b"))
    sent = await call_tool(
        a, "glove_mesh_send_message", {"to": "b", "content": "x", "blocking": True}
    )
    await eventually(lambda: items(store_b))
    ack = await call_tool(b, "glove_mesh_acknowledge", {"message_id": sent.data["message_id"]})
    assert ack.message == 'glove_mesh_acknowledge failed: Agent "b" may not message "a".'


def test_signing_without_a_key_for_the_sender_is_refused():
    from mesh.core import MeshGuard

    guard = MeshGuard(signing_keys={"a": "k"})
    with pytest.raises(ValueError, match='No signing key is configured for agent "z"'):
        guard.sign({"id": "m", "from": "z", "content": ""})
    with pytest.raises(MeshAccessDeniedError):
        raise MeshAccessDeniedError("a", "b")


class _ForgingNetwork:
    """An in-process network view that signs with the forger's keys but delivers on the real one."""

    def __init__(self, network, forger_guard):
        self._network = network
        self._guard = forger_guard

    def __getattr__(self, name):
        return getattr(self._network, name)

    async def deliver_direct(self, message):
        from mesh.core.types import IncomingMeshMessage

        wire = self._guard.sign(IncomingMeshMessage.from_message(message, "direct").to_dict())
        await self._network._fan_out_wire(message.to, wire)


def _unsigned(honest, agent_id):
    from mesh.core.network import InMemoryMeshAdapter

    class _Unsigned:
        def __init__(self, network):
            self._network = network

        def __getattr__(self, name):
            return getattr(self._network, name)

        async def deliver_direct(self, message):
            from mesh.core.types import IncomingMeshMessage

            await self._network._fan_out_wire(
                message.to, IncomingMeshMessage.from_message(message, "direct").to_dict()
            )

    return InMemoryMeshAdapter(_Unsigned(honest.network), agent_id)
