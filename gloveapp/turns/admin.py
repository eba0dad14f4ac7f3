"""Turns in the admin: running, queued, failed and retried ones (the task backend's own
records are in its admin too: django-tasks-db's task results, RQ's dashboard)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from gloveapp.admin_lists import ExactValueFilter, FixedChoicesFilter, ScaleAdmin
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.services import MESH_SOURCE


class SourceFilter(FixedChoicesFilter):
    """Where turns come from (fixed in the code), not a DISTINCT over every turn."""

    title = "source"
    parameter_name = "source"
    field = "source"

    def fixed_choices(self) -> list[tuple[str, str]]:
        # Add a source here when an entry point starts turns under a new name.
        return [
            ("page", "chat page"),
            ("api", "REST API"),
            ("python", "Python (submit_message)"),
            (MESH_SOURCE, "mesh"),
        ]


class SessionIdFilter(ExactValueFilter):
    title = "session id"
    parameter_name = "session"
    field = "session_id"
    placeholder = "an exact session id"


class RetriedFilter(admin.SimpleListFilter):
    title = "retried"
    parameter_name = "retried"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Retried after a worker stopped"), ("no", "First attempt")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Turn]) -> QuerySet[Turn]:
        if self.value() == "yes":
            return queryset.filter(attempts__gt=1)
        if self.value() == "no":
            return queryset.filter(attempts__lte=1)
        return queryset


class TurnSlotInline(admin.TabularInline):
    model = TurnSlot
    extra = 0
    can_delete = False
    fields = ("slot_id", "renderer", "tool_name", "status", "answer", "created_at")
    readonly_fields = fields


@admin.register(Turn)
class TurnAdmin(ScaleAdmin):
    list_display = (
        "id",
        "session_id",
        "user",
        "source",
        "status",
        "attempts",
        "worker_id",
        "created_at",
        "started_at",
        "finished_at",
    )
    # Newest first, backwards on the primary key; the other columns have no index of their
    # own, so they are not sortable.
    ordering = ("-id",)
    sortable_by = ("id",)
    list_filter = ("status", RetriedFilter, SourceFilter, SessionIdFilter)
    list_select_related = ("user",)
    # A turn's number, its session's exact id (`session, status` index), its user's exact
    # username (`user, created_at` index). Not the text: no index holds it.
    search_exact = ("id", "session_id")
    search_usernames = ("user",)
    search_help_text = "A turn's number, an exact session id, or a user's exact username."
    readonly_fields = [field.name for field in Turn._meta.fields]
    inlines = [TurnSlotInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Turns are posted through the chat, where the queue and the user's limit apply.
        return False
