"""Read-side queries of a session's inbox, returning runtime (wire-format) inbox items."""

from __future__ import annotations

from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.lib import keyset
from gloveapp.lib.paging import Cursor
from inbox.models import InboxItem
from inbox.serialization import inbox_item_to_core

# Consumed items the store's unpaged read returns with the open ones, the newest: the agent
# loop reads only open items, and a long session's consumed ones would otherwise come back
# on every read, forever. Older ones are read in pages (`consumed_inbox_page`).
CONSUMED_UNPAGED = 100


def read_inbox_items(session_id: str, status: str | None = None) -> list[CoreInboxItem]:
    """The session's items, oldest first: every open one (pending, resolved) and the newest
    `CONSUMED_UNPAGED` consumed ones; or those of one `status` (consumed: the newest
    `CONSUMED_UNPAGED`). One statement (the agent loop reads it every turn), each part one
    range of `inbox_session_status_idx`: as an OR of the two, PostgreSQL read every item of
    the session (the figures: docs/explanation/scale.md)."""
    table = InboxItem._meta.db_table
    consumed = InboxItem.Status.CONSUMED
    newest_consumed = (
        f'SELECT * FROM (SELECT * FROM "{table}" WHERE session_id = %s AND status = %s '
        f"ORDER BY created_at DESC, key DESC LIMIT {CONSUMED_UNPAGED}) newest"
    )
    if status == consumed:
        sql, params = newest_consumed, [session_id, consumed]
    else:
        wanted = [status] if status else [InboxItem.Status.PENDING, InboxItem.Status.RESOLVED]
        sql = f'SELECT * FROM "{table}" WHERE session_id = %s AND status IN ({", ".join(["%s"] * len(wanted))})'
        params = [session_id, *wanted]
        if not status:
            sql, params = f"{sql} UNION ALL {newest_consumed}", [*params, session_id, consumed]
    # Ties broken by the session's own ids, never by the global ones it must not see.
    picked = InboxItem.objects.raw(f"SELECT * FROM ({sql}) picked ORDER BY created_at, key", params)
    return [inbox_item_to_core(row) for row in picked]


def consumed_inbox_page(
    session_id: str, *, limit: int, cursor: Cursor | None = None
) -> tuple[list[CoreInboxItem], Cursor | None]:
    """A page of the session's consumed items, newest first, from `cursor` on; and the
    next page's cursor (None on the last)."""
    rows = InboxItem.objects.filter(session_id=session_id, status=InboxItem.Status.CONSUMED)
    if cursor is not None:
        rows = rows.filter(keyset.before(cursor))
    picked = list(rows.order_by("-created_at", "-key")[: limit + 1])
    following = None
    if len(picked) > limit:
        picked = picked[:limit]
        following = Cursor(at=picked[-1].created_at, tie=picked[-1].key)
    return [inbox_item_to_core(row) for row in picked], following


# Consumed items a chat's sidebar shows, the newest: the rest stay in the database (and in
# the admin) but a long chat's page never reads them all.
DELIVERED_SHOWN = 20


def inbox_items_by_state(session_id: str) -> dict[str, list[InboxItem]]:
    """The session's items as the chat page groups them: "watching" (pending), "resolved"
    (waiting for the agent to read) and "delivered" (consumed, the newest `DELIVERED_SHOWN`),
    each oldest first."""
    groups: dict[str, list[InboxItem]] = {"watching": [], "resolved": [], "delivered": []}
    open_items = InboxItem.objects.filter(
        session_id=session_id,
        status__in=[InboxItem.Status.PENDING, InboxItem.Status.RESOLVED],
    ).order_by("created_at", "key")
    for item in open_items:
        if item.status == InboxItem.Status.PENDING:
            groups["watching"].append(item)
        else:
            groups["resolved"].append(item)
    delivered = InboxItem.objects.filter(session_id=session_id, status=InboxItem.Status.CONSUMED)
    groups["delivered"] = list(delivered.order_by("-created_at", "-key")[:DELIVERED_SHOWN])[::-1]
    return groups
