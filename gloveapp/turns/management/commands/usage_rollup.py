"""`manage.py usage_rollup [--days N]`: sum the usage page's days from the turn timeline.

The turn worker's scheduler does this before each retention round (the last two days, and
any day of the page's window not summed yet); this is the same by hand, e.g. `--days 90`
after restoring steps. Idempotent: a day's row is replaced by its sum.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gloveapp.turns.usage_rollup import MAX_DAYS, RECENT_DAYS, usage_rollup


class Command(BaseCommand):
    help = "Sum the usage page's days (the last --days, and any not summed yet)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days", type=int, default=RECENT_DAYS, help="sum again this many recent days"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if not 0 < days <= MAX_DAYS:
            raise CommandError(f"--days must be between 1 and {MAX_DAYS}")
        written = usage_rollup(days=days)
        self.stdout.write(f"Summed {len(written)} day(s) of usage.")
