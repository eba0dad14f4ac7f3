"""`manage.py prune_idempotency_keys [--days N]`: forget the answers kept for retries.

The turn worker's scheduler does this by itself (GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS); this is
the manual tool, sharing its code. A client retries within seconds or minutes; a retry
after the cut is a new request (it is stored again), so keep more days than any client
retries for.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gloveapp.conversations.idempotency import idempotency_keys_prune


class Command(BaseCommand):
    help = "Delete Idempotency-Key answers older than --days (default 2)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, default=2.0, help="keep this many days")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days <= 0:
            raise CommandError("--days must be a positive number of days")
        deleted = idempotency_keys_prune(older_than=timedelta(days=days))
        self.stdout.write(f"Deleted {deleted} idempotency key(s) older than {days:g} day(s).")
