"""Reads of the workspace inbox, always scoped to one user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef

from gloveapp.core import input_rules
from inbox.workspaces.models import (
    Notification,
    Workspace,
    WorkspaceEntry,
    WorkspaceEntryRead,
    WorkspaceReply,
)

DEFAULT_LIMIT = 100
MAX_LIMIT = 200
BADGE_CAP = 100  # the badge says "99+" beyond this; counting further is wasted work


class BadParameter(ValueError):
    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        super().__init__(problem)


@dataclass
class HistoryPage:
    entries: list[WorkspaceEntry]
    read_at: dict[uuid.UUID, Any]
    has_more: bool


def parse_limit(raw: Any, *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool):
        raise BadParameter("limit", "must be a positive integer")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise BadParameter("limit", "must be a positive integer") from None
    if isinstance(raw, float) and raw != value:
        raise BadParameter("limit", "must be a positive integer")
    if value < 1:
        raise BadParameter("limit", "must be a positive integer")
    if value > maximum:
        # Refused, not clamped: a caller asking for more would silently get less.
        raise BadParameter("limit", f"must be at most {maximum}")
    return value


def owned_workspace(user: Any, workspace_id: Any) -> Workspace | None:
    # An id no row can have (a NUL, a lone surrogate, too long) is not sent to the database,
    # whose driver would refuse it with an error (a 500).
    if not isinstance(workspace_id, str) or not input_rules.could_name_a_row(
        workspace_id, max_length=64
    ):
        return None
    if user is None or not user.is_authenticated:
        return None
    return Workspace.objects.filter(pk=workspace_id, owner=user).first()


def owned_workspace_ids(user: Any) -> list[str]:
    """The ids of the user's workspaces (the inbox page follows each one's live stream)."""
    return list(Workspace.objects.filter(owner=user).values_list("pk", flat=True))


def notifications_of(user: Any, *, limit: int = 100) -> list[Notification]:
    """The user's newest notifications, with their workspaces."""
    rows = Notification.objects.filter(user=user).select_related("workspace")
    return list(rows[:limit])


def owned_entry(user: Any, entry_id: Any) -> WorkspaceEntry | None:
    try:
        pk = uuid.UUID(str(entry_id))
    except ValueError:
        return None
    if user is None or not user.is_authenticated:
        return None
    return WorkspaceEntry.objects.select_related("workspace").filter(pk=pk, owner=user).first()


ENTRY_FILTERS = ("all", "unread", "answered")


def entries_page(
    *,
    owner_id: Any,
    limit: int,
    before: Any = None,
    workspace_id: str | None = None,
    show: str = "all",
) -> tuple[list[WorkspaceEntry], bool]:
    """Newest first, `limit` entries older than the `before` entry (keyset on (ts, id));
    `show` "unread" keeps the owner's unread ones, "answered" those with a reply."""
    rows = WorkspaceEntry.objects.filter(owner_id=owner_id)
    if show == "unread":
        read = WorkspaceEntryRead.objects.filter(entry=OuterRef("pk"), user_id=owner_id)
        rows = rows.exclude(Exists(read))
    elif show == "answered":
        rows = rows.filter(Exists(WorkspaceReply.objects.filter(entry=OuterRef("pk"))))
    if workspace_id is not None:
        rows = rows.filter(workspace_id=workspace_id)
    if before not in (None, ""):
        try:
            cursor_id = uuid.UUID(str(before))
        except ValueError:
            raise BadParameter("before", "must be the id of an entry") from None
        cursor = rows.filter(pk=cursor_id).values_list("ts", flat=True).first()
        if cursor is None:
            raise BadParameter("before", "no such entry (deleted, or not yours)")
        # `ts <= cursor` bounds the index range so a deep page starts at the cursor; the OR
        # then drops the cursor's own ts ties that come at or after it.
        rows = rows.filter(ts__lte=cursor).exclude(ts=cursor, id__gte=cursor_id)
    page = list(rows.order_by("-ts", "-id")[: limit + 1])
    return page[:limit], len(page) > limit


def history(
    *,
    user: Any,
    limit: Any = None,
    before: Any = None,
    workspace_id: Any = None,
    show: str = "all",
) -> HistoryPage:
    limit = parse_limit(limit)
    scope_id = None
    if workspace_id not in (None, ""):
        workspace = owned_workspace(user, workspace_id)
        if workspace is None:
            raise BadParameter("workspaceId", "no such workspace")
        scope_id = workspace.pk
    entries, has_more = entries_page(
        owner_id=user.pk, limit=limit, before=before, workspace_id=scope_id, show=show
    )
    reads = dict(
        WorkspaceEntryRead.objects.filter(
            user=user, entry_id__in=[e.pk for e in entries]
        ).values_list("entry_id", "read_at")
    )
    return HistoryPage(entries=entries, read_at=reads, has_more=has_more)


def unread_count(user: Any, *, cap: int = BADGE_CAP) -> int:
    if user is None or not user.is_authenticated:
        return 0
    unread = WorkspaceEntry.objects.filter(owner=user).exclude(reads__user=user)
    return unread.values("pk")[:cap].count()


def entry_replies(entry: WorkspaceEntry) -> list[WorkspaceReply]:
    """The entry's thread: what the user wrote back, oldest first."""
    return list(entry.replies.select_related("author").order_by("ts", "id"))


def entry_is_read(entry: WorkspaceEntry, user: Any) -> bool:
    """Whether `user` marked the entry read."""
    return entry.reads.filter(user=user).exists()
