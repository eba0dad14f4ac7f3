"""`manage.py prune_live_events [--days N]`: keep the live event log from growing forever.

The turn worker's scheduler does this by itself (GLOVE_RETAIN_LIVE_EVENTS_DAYS); this is
the manual tool, sharing its code. Clients that reconnect from before the cut are told to
reload their state (`resync`), so nothing is silently missed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gloveapp.live.eventlog import live_events_prune


class Command(BaseCommand):
    help = "Delete live events older than --days (default 7)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=7.0, help="keep this many days")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days <= 0:
            raise CommandError("--days must be a positive number of days")
        deleted = live_events_prune(older_than=timedelta(days=days))
        self.stdout.write(f"Deleted {deleted} live event(s) older than {days:g} day(s).")
