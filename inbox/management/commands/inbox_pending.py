"""`manage.py inbox_pending`: list the inbox items that wait for a resolution."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from gloveapp.conversations.serialization import iso_or_none
from inbox.models import InboxItem


class Command(BaseCommand):
    help = "List pending inbox items across all sessions, oldest first."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--session", help="Only this session's items.")
        parser.add_argument("--tag", help="Only items with this tag.")
        parser.add_argument("--blocking", action="store_true", help="Only blocking items.")
        parser.add_argument("--json", action="store_true", help="One JSON array, for scripts.")

    def handle(self, *args: Any, **options: Any) -> None:
        items = InboxItem.objects.filter(status=InboxItem.Status.PENDING).order_by(
            "created_at", "pk"
        )
        if options["session"]:
            items = items.filter(session_id=options["session"])
        if options["tag"]:
            items = items.filter(tag=options["tag"])
        if options["blocking"]:
            items = items.filter(blocking=True)
        rows = [
            {
                "id": item.id,
                # What the session's agent calls it (the same as `id` unless that was taken).
                "key": item.key,
                "sessionId": item.session_id,
                "tag": item.tag,
                "request": item.request,
                "blocking": item.blocking,
                "createdAt": iso_or_none(item.created_at),
                "expiresAt": iso_or_none(item.expires_at),
            }
            for item in items
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        if not rows:
            self.stdout.write("No pending inbox items.")
            return
        for row in rows:
            flags = " BLOCKING" if row["blocking"] else ""
            if row["key"] != row["id"]:
                flags = f" (agent's id {row['key']}){flags}"
            expires = f" expires {row['expiresAt']}" if row["expiresAt"] else ""
            self.stdout.write(
                f"{row['id']}  [{row['tag']}]{flags}  session {row['sessionId']}  "
                f"posted {row['createdAt']}{expires}\n    {row['request']}"
            )
        self.stdout.write(f"{len(rows)} pending item(s).")
