"""The event log in the Django admin, read-only: events are written by services, not by hand."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from gloveapp.admin_lists import ExactValueFilter, ScaleAdmin
from gloveapp.live.models import LiveEvent


class TypeFilter(ExactValueFilter):
    title = "type"
    parameter_name = "type"
    field = "type"
    placeholder = "e.g. message.appended"


@admin.register(LiveEvent)
class LiveEventAdmin(ScaleAdmin):
    list_display = ("id", "stream", "type", "created_at")
    # Newest first on the primary key; one stream's on its (stream, id) index.
    ordering = ("-id",)
    sortable_by = ("id",)
    list_filter = (TypeFilter,)
    search_exact = ("stream", "id")
    search_help_text = "An exact stream (e.g. session:<id>) or an event's number."
    readonly_fields = ("id", "stream", "type", "payload", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
