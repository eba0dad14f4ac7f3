"""Workspaces, their entries and legacy notifications in the admin, for staff.

Tokens are never shown: only their hash is stored, and it is not even displayed. A new
token comes from `manage.py rotate_workspace_token`, which prints it once. Entries are
written by agents: staff can read and delete them, not edit them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from inbox.workspaces.models import Notification, Workspace, WorkspaceEntry


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Workspace)
class WorkspaceAdmin(ReadOnlyAdmin):
    list_display = ["label", "id", "owner", "root", "created_at"]
    search_fields = ["label", "id", "root", "owner__username"]
    exclude = ["token_hash"]
    list_select_related = ["owner"]


@admin.register(WorkspaceEntry)
class WorkspaceEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "workspace_label", "workspace", "owner", "ts", "comments_preview"]
    list_filter = ["workspace"]
    search_fields = ["id", "comments", "workspace__label"]
    list_select_related = ["workspace", "owner"]
    show_full_result_count = False  # counting 100k rows per page view is wasted work

    @admin.display(description="comments")
    def comments_preview(self, entry: WorkspaceEntry) -> str:
        return (entry.comments or "")[:80]


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["text", "user", "urgency", "source", "created_at"]
    list_filter = ["urgency", "source"]
