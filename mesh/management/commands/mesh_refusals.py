"""`python manage.py mesh_refusals`: how many mesh frames were refused, by reason."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from mesh import refusals
from mesh.models import MeshRefusal


class Command(BaseCommand):
    help = "Show how many mesh frames recipients refused, by reason (all processes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        refusals.flush()  # this process's own, if any
        counts = {row.reason: row.count for row in MeshRefusal.objects.all()}
        if options["json"]:
            self.stdout.write(json.dumps(counts, sort_keys=True))
            return
        if not counts:
            self.stdout.write("No mesh frame has been refused.")
            return
        for row in MeshRefusal.objects.all():
            self.stdout.write(f"{row.reason}\t{row.count}\tlast {row.last_at.isoformat()}")
