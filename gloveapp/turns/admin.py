"""Turns in the admin: running, queued, failed and retried ones (the task backend's own
records are in its admin too: django-tasks-db's task results, RQ's dashboard)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from gloveapp.turns.models import Turn, TurnSlot


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
class TurnAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "session",
        "user",
        "source",
        "status",
        "attempts",
        "worker_id",
        "created_at",
        "started_at",
        "finished_at",
    )
    list_filter = ("status", RetriedFilter, "source")
    search_fields = ("session__id", "user__username", "text", "worker_id")
    readonly_fields = [field.name for field in Turn._meta.fields]
    inlines = [TurnSlotInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Turns are posted through the chat, where the queue and the user's limit apply.
        return False
