"""`python manage.py run_agent NAME --mesh-id ID`: run a configured agent as a mesh peer."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from gloveapp.turns import event_loop
from gloveapp.turns.mesh_peer import run_mesh_peer
from mesh.layers import InvalidMeshConfig


class Command(BaseCommand):
    help = (
        "Keep an agent from GLOVE_AGENTS on the mesh as a peer: every message, "
        "acknowledgement or reply that arrives wakes it, queueing a turn that a turn worker "
        "runs (start one with `manage.py turn_worker`)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="The agent's name in GLOVE_AGENTS.")
        parser.add_argument("--mesh-id", required=True, help="Its id on the mesh.")
        parser.add_argument("--transport", default="default", help="A key of the MESH setting.")
        parser.add_argument("--description", default=None)
        parser.add_argument(
            "--capability", action="append", default=[], help="May be given several times."
        )
        parser.add_argument(
            "--max-turns",
            type=int,
            default=None,
            help="Stop once this many wake-up turns were queued and have run.",
        )

    def handle(self, *args, **options):
        mesh_id = options["mesh_id"].strip()
        if not mesh_id or any(ch.isspace() for ch in mesh_id) or len(mesh_id) > 100:
            raise CommandError("--mesh-id must be a non-empty id without spaces (at most 100).")
        if options["max_turns"] is not None and options["max_turns"] < 1:
            raise CommandError("--max-turns must be at least 1.")
        try:
            turns = event_loop.run(self._serve(mesh_id, options))
        except (ImproperlyConfigured, InvalidMeshConfig, ValueError) as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"{mesh_id}: stopped after {turns} turn(s).")

    async def _serve(self, mesh_id: str, options) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            # Off the main thread (call_command from a test's thread) there are no signal
            # handlers: asyncio says RuntimeError, uvloop ValueError.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop.set)
        return await run_mesh_peer(
            agent_name=options["name"],
            mesh_id=mesh_id,
            transport_alias=options["transport"],
            description=options["description"],
            capabilities=options["capability"],
            max_turns=options["max_turns"],
            stop=stop,
            on_ready=lambda: self.stdout.write(f"{mesh_id}: on the mesh, waiting.", ending="\n"),
        )
