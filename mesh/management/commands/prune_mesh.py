"""`manage.py prune_mesh [--days N]`: keep the database mesh transport's tables bounded.

The turn worker's scheduler does the same by itself (GLOVE_RETAIN_MESH_DAYS); this is the
manual tool. It forgets who sent messages older than the cut (their late acks are then
refused), their delivery records and the registrations of deleted chats.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mesh.services import mesh_prune


class Command(BaseCommand):
    help = (
        "Delete mesh sender and delivery records and deleted chats' registrations older "
        "than --days (30)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=30.0, help="keep this many days")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days <= 0:
            raise CommandError("--days must be a positive number of days")
        pruned = mesh_prune(older_than=timedelta(days=days))
        self.stdout.write(
            f"Deleted {pruned['sent_messages']} sent message record(s), "
            f"{pruned['deliveries']} delivery record(s) and "
            f"{pruned['registrations']} deleted chat registration(s) older than {days:g} day(s)."
        )
