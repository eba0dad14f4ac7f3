"""Workspaces, their entries and legacy notifications in the admin, for staff.

Tokens are never shown: only their hash is stored, and it is not even displayed. A new
token comes from `manage.py rotate_workspace_token`, which prints it once. Entries are
written by agents: staff can read and delete them, not edit them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from gloveapp.lib.admin import ExactValueFilter, FixedChoicesFilter, ScaleAdmin
from inbox.workspaces.models import Notification, Workspace, WorkspaceEntry


class ReadOnlyAdmin(ScaleAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Workspace)
class WorkspaceAdmin(ReadOnlyAdmin):
    list_display = ["label", "id", "owner", "root", "created_at"]
    # By label on `workspace_label_idx` (label, id).
    sortable_by = ["label"]
    search_exact = ("id", "label")
    search_prefix = ("id",)
    search_usernames = ("owner",)
    search_help_text = "A workspace id or its beginning, an exact label, or an owner's username."
    exclude = ["token_hash"]
    list_select_related = ["owner"]


class WorkspaceIdFilter(ExactValueFilter):
    title = "workspace"
    parameter_name = "workspace__id__exact"  # the name the related filter it replaces had
    field = "workspace_id"
    placeholder = "a workspace id"


@admin.register(WorkspaceEntry)
class WorkspaceEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "workspace_label", "workspace", "owner", "ts", "comments_preview"]
    # Newest first on `ws_entry_ts_idx` (ts, id); one workspace's on its keyset index.
    ordering = ["-ts", "-id"]
    sortable_by = ["ts"]
    list_filter = [WorkspaceIdFilter]
    search_exact = ("id", "workspace_id")
    search_help_text = "An entry's id or an exact workspace id."
    list_select_related = ["workspace", "owner"]

    @admin.display(description="comments")
    def comments_preview(self, entry: WorkspaceEntry) -> str:
        return (entry.comments or "")[:80]


class NotificationSourceFilter(FixedChoicesFilter):
    title = "source"
    parameter_name = "source"
    field = "source"

    def fixed_choices(self) -> list[tuple[str, str]]:
        return [("manual", "manual"), ("workspace", "workspace")]


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["text", "user", "urgency", "source", "created_at"]
    # Newest first on `notification_created_idx` (created_at, id).
    ordering = ["-created_at", "-id"]
    sortable_by = ["created_at"]
    list_filter = ["urgency", NotificationSourceFilter]
    list_select_related = ["user"]
    search_usernames = ("user",)
    search_help_text = "A user's exact username."
