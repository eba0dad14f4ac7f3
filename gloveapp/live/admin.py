"""The event log in the Django admin, read-only: events are written by services, not by hand."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest
from django.urls import reverse

from gloveapp.lib.admin import ExactValueFilter, ScaleAdmin
from gloveapp.live.models import LiveEvent

# An event's page is `<id>~<its UTC day, YYYYMMDD>`: the day names the one partition that
# holds it (`gloveapp.lib.db.partitions`), where an id alone probed every day's.
DAY_MARK = "~"


def event_key(event: LiveEvent) -> str:
    return f"{event.pk}{DAY_MARK}{event.created_at.astimezone(UTC):%Y%m%d}"


def parse_event_key(key: str) -> tuple[int, date | None] | None:
    """`<id>~<YYYYMMDD>` or a bare `<id>`; None for anything else."""
    number, _, day = str(key).partition(DAY_MARK)
    if not number.isdigit() or len(number) > 18:
        return None
    if not day:
        return int(number), None
    try:
        return int(number), datetime.strptime(day, "%Y%m%d").date()
    except ValueError:
        return None


class EventChangeList(ChangeList):
    def url_for_result(self, result: LiveEvent) -> str:
        opts = self.opts
        return reverse(
            f"admin:{opts.app_label}_{opts.model_name}_change",
            args=(quote(event_key(result)),),
            current_app=self.model_admin.admin_site.name,
        )


class TypeFilter(ExactValueFilter):
    title = "type"
    parameter_name = "type"
    field = "type"
    placeholder = "e.g. message.appended"


@admin.register(LiveEvent)
class LiveEventAdmin(ScaleAdmin):
    list_display = ("id", "stream", "seq", "type", "created_at")
    # Newest first on the primary key; one stream's on its (stream, id) index.
    ordering = ("-id",)
    sortable_by = ("id",)
    list_filter = (TypeFilter,)
    search_exact = ("stream", "id")
    search_help_text = "An exact stream (e.g. session:<id>) or an event's number."
    readonly_fields = ("id", "stream", "seq", "type", "payload", "created_at")

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return EventChangeList

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        found = parse_event_key(object_id)
        if found is None:
            return None
        number, day = found
        events = self.get_queryset(request).filter(pk=number)
        if day is not None:
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            events = events.filter(created_at__gte=start, created_at__lt=start + timedelta(days=1))
        return events.first()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
