"""`manage.py resolve_inbox_item ITEM_ID "response"`: resolve a pending item from a shell.

Exit status: 0 resolved; 1 bad input; 3 no such item; 4 no longer pending (already resolved
or consumed). Scripts can tell the cases apart; the message says which it was.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from inbox.services import inbox_item_resolve

EXIT_INVALID, EXIT_NOT_FOUND, EXIT_NOT_PENDING = 1, 3, 4


class Command(BaseCommand):
    help = (
        "Resolve a pending inbox item with a response; the agent sees it on its next turn. "
        "Exit status: 0 resolved, 1 bad input, 3 unknown id, 4 not pending."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("item_id", help='The item id, e.g. "inbox_1711900000000_abc123".')
        parser.add_argument(
            "response", help='The response text the agent will read; "-" reads it from stdin.'
        )

    def handle(self, *args: Any, item_id: str, response: str, **options: Any) -> None:
        if response == "-":
            response = sys.stdin.read().rstrip("\n")
        try:
            item = inbox_item_resolve(item_id=item_id, response=response, resolved_by="command")
        except InboxItemNotFound as exc:
            raise CommandError(str(exc), returncode=EXIT_NOT_FOUND) from None
        except InboxTransitionError as exc:
            raise CommandError(str(exc), returncode=EXIT_NOT_PENDING) from None
        except ValueError as exc:
            raise CommandError(str(exc), returncode=EXIT_INVALID) from None
        self.stdout.write(
            self.style.SUCCESS(
                f'Resolved inbox item "{item.id}" [{item.tag}] of session {item.session_id}.'
            )
        )
