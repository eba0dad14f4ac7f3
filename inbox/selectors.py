"""Read-side queries of a session's inbox, returning runtime (wire-format) inbox items."""

from __future__ import annotations

from gloveapp.core.types import InboxItem as CoreInboxItem
from inbox.models import InboxItem
from inbox.serialization import inbox_item_to_core


def read_inbox_items(session_id: str, status: str | None = None) -> list[CoreInboxItem]:
    rows = InboxItem.objects.filter(session_id=session_id)
    if status is not None:
        rows = rows.filter(status=status)
    # Ties broken by the session's own ids, never by the global ones it must not see.
    return [inbox_item_to_core(row) for row in rows.order_by("created_at", "key")]


def inbox_items_by_state(session_id: str) -> dict[str, list[InboxItem]]:
    """The session's items as the chat page groups them: "watching" (pending), "resolved"
    (waiting for the agent to read) and "delivered" (consumed), each oldest first."""
    groups: dict[str, list[InboxItem]] = {"watching": [], "resolved": [], "delivered": []}
    for item in InboxItem.objects.filter(session_id=session_id).order_by("created_at", "key"):
        if item.status == InboxItem.Status.PENDING:
            groups["watching"].append(item)
        elif item.status == InboxItem.Status.RESOLVED:
            groups["resolved"].append(item)
        else:
            groups["delivered"].append(item)
    return groups
