"""Agent "b" in an OS process of its own, for the cross-process tests.

    python -m tests.mesh.peer_process redis <redis url>
    DATABASE_URL=<test database> python -m tests.mesh.peer_process database -

It mounts b on the mesh, prints "ready", and on the first message that arrives (or that
arrived while it was not running) runs one turn
with a scripted model: acknowledge the message, then reply to it. It prints "done <model calls>" and leaves when its stdin closes.
"""

from __future__ import annotations

import asyncio
import re
import sys

from gloveapp.core import Message
from mesh.core import mount_mesh, unmount_mesh
from mesh.core.peer import serve_mesh_peer
from tests.core.support import calls
from tests.mesh.support import B, make_agent


def _message_id(prompt: list[Message]) -> str:
    banner = next(m.text for m in prompt if m.sender == "user" and m.text.startswith("[Inbox:"))
    return re.search(r"\[message id: (msg_[^\]]+)\]", banner).group(1)


def acknowledge(prompt: list[Message]) -> Message:
    return calls(
        ("glove_mesh_acknowledge", {"message_id": _message_id(prompt), "note": "ack from B"})
    )


def reply(prompt: list[Message]) -> Message:
    message_id = _message_id(prompt)
    return calls(
        (
            "glove_mesh_send_message",
            {"to": "a", "content": "reply from B", "in_reply_to": message_id},
        )
    )


def transport_and_store(kind: str, url: str):
    if kind == "redis":
        from mesh.transports.redis_pubsub import RedisMeshTransport

        return RedisMeshTransport(url=url), None
    if kind == "database":
        # `url` is the DATABASE_URL of the test database, already in the environment.
        import django

        django.setup()
        from mesh.transports.database import DatabaseMeshTransport, mesh_store

        return DatabaseMeshTransport(poll_interval=0.01), mesh_store("b")
    raise SystemExit(f"unknown transport {kind!r}")


async def main(kind: str, url: str) -> None:
    transport, store = transport_and_store(kind, url)
    glove, model, _store = make_agent("b", [acknowledge, reply, "Done."], store=store)
    mount = await mount_mesh(glove, adapter=transport.adapter("b"), identity=B)
    print("ready", flush=True)
    await serve_mesh_peer(mount, max_turns=1)
    print(f"done {len(model.calls)}", flush=True)
    # Stay on the mesh until the test says so (closes stdin): it still looks b up by name.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await unmount_mesh(glove, unregister=False)
    await transport.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
