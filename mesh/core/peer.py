"""Running an agent as a mesh peer: wake on what arrives, run one turn, wait again.

    mount = await mount_mesh(glove, adapter=..., identity=...)
    await serve_mesh_peer(mount)                      # forever
    await serve_mesh_peer(mount, turn=start_turn)     # the Django runner passes its own turn

`turn` is the single call that runs one turn of the agent (by default
`process_request(WAKE_PROMPT)` in this process); everything that arrives while a turn runs is
picked up by the next one, so turns never overlap and nothing is missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mesh.core.mount import MeshMount

logger = logging.getLogger("mesh")

WAKE_PROMPT = "New mesh messages are in your inbox. Read them and act on them."


async def wait_for_arrival(mount: MeshMount, stop: asyncio.Event | None = None) -> bool:
    """Wait until something arrives (True) or `stop` is set (False). The arrival flag is
    cleared on the way out, before the caller's turn: what lands during it wakes the next."""
    waiters = [asyncio.ensure_future(mount.arrivals.wait())]
    if stop is not None:
        waiters.append(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    if stop is not None and stop.is_set():
        return False
    mount.arrivals.clear()
    return True


async def serve_mesh_peer(
    mount: MeshMount,
    *,
    turn: Callable[[], Awaitable[Any]] | None = None,
    max_turns: int | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run a turn each time something arrives; returns the number of turns run."""
    run_turn = turn or (lambda: mount.agent.process_request(WAKE_PROMPT))
    turns = 0
    while max_turns is None or turns < max_turns:
        if not await wait_for_arrival(mount, stop):
            break
        try:
            await run_turn()
        except Exception:
            logger.exception("[glove-mesh] peer turn failed for %s:", mount.identity.id)
        turns += 1
    return turns
