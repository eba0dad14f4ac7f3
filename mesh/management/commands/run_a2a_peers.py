"""`python manage.py run_a2a_peers [NAME ...]`: keep external A2A agents on the mesh."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from django.core.management.base import BaseCommand, CommandError

from mesh.a2a import A2APeer
from mesh.a2a_peers import run_a2a_peers
from mesh.layers import InvalidMeshConfig


class Command(BaseCommand):
    help = (
        "Keep the A2A agents of MESH_A2A_PEERS (all of them, or those named) on the mesh as "
        "peers: what a mesh agent sends one goes to it as an A2A message, and its answer "
        "comes back as that peer's reply."
    )

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="Keys of MESH_A2A_PEERS (default: all).")

    def handle(self, *args, **options):
        try:
            peers = asyncio.run(self._serve(options["names"]))
        except (InvalidMeshConfig, ValueError) as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"stopped: {', '.join(peers) or 'no peer'}.")

    async def _serve(self, names: list[str]) -> list[str]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            # Off the main thread (call_command from a test's thread) there are no signal
            # handlers.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop.set)
        return await run_a2a_peers(names, stop=stop, on_ready=self._ready)

    def _ready(self, peer: A2APeer) -> None:
        card = "its card read" if peer.card is not None else "its card unreadable for now"
        self.stdout.write(
            f"{peer.config.mesh_id}: on the mesh for the A2A agent {peer.name!r} "
            f"({peer.config.card_url}, {card}), waiting."
        )
