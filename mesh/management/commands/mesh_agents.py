"""`python manage.py mesh_agents`: who is registered on the mesh."""

from __future__ import annotations

import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from mesh.layers import InvalidMeshConfig, get_mesh_transport


class Command(BaseCommand):
    help = "List the agents registered on the mesh (the configured transport's registry)."

    def add_arguments(self, parser):
        parser.add_argument("--transport", default="default", help="A key of the MESH setting.")
        parser.add_argument("--json", action="store_true", help="One JSON array.")

    def handle(self, *args, **options):
        try:
            transport = get_mesh_transport(options["transport"])
        except InvalidMeshConfig as error:
            raise CommandError(str(error)) from error
        agents = asyncio.run(self._list(transport))
        if options["json"]:
            self.stdout.write(json.dumps([agent.to_dict() for agent in agents]))
            return
        if not agents:
            self.stdout.write("No agents are registered on the mesh.")
            return
        for agent in sorted(agents, key=lambda a: a.id):
            capabilities = ", ".join(agent.capabilities or []) or "-"
            self.stdout.write(f"{agent.id}\t{agent.name}\t{capabilities}\t{agent.description}")

    async def _list(self, transport):
        try:
            # Listing needs no identity of its own; any adapter of the transport reads it.
            return await transport.adapter("mesh-agents-command").list_agents()
        finally:
            await transport.close()
