"""`manage.py expire_inbox_items`: answer pending items whose `expires_at` has passed.

The turn worker's scheduler does this every GLOVE_APPROVAL_SWEEP_SECONDS (no cron line);
this is the manual tool. Each expired
item is resolved with an "Expired: ..." response by `expiry`, so the agent that posted it
learns on its next turn that no answer came, instead of waiting forever.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from inbox.services import expire_inbox_items


class Command(BaseCommand):
    help = "Resolve every pending inbox item whose expires_at is in the past."

    def handle(self, *args: Any, **options: Any) -> None:
        expired = expire_inbox_items()
        self.stdout.write(f"Expired {expired} inbox item(s).")
