"""Conversations in the Django admin, read-only: history is written by agents, not by hand."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from gloveapp.conversations import services
from gloveapp.conversations.models import Message, Session, Task

# A session page shows the newest messages only; a long history would make it unusable.
MESSAGES_SHOWN = 200


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RecentMessagesFormSet(BaseInlineFormSet):
    def get_queryset(self) -> Any:
        rows = super().get_queryset()
        last = rows.order_by("-seq").values_list("seq", flat=True).first()
        if last is None:
            return rows
        return rows.filter(seq__gt=last - MESSAGES_SHOWN).order_by("seq")


class MessageInline(ReadOnlyInline):
    model = Message
    formset = RecentMessagesFormSet
    fields = readonly_fields = (
        "seq",
        "sender",
        "text",
        "is_compaction",
        "is_skill_injection",
        "framework_context",
        "tool_calls",
        "tool_results",
        "created_at",
    )
    verbose_name_plural = f"messages (the newest {MESSAGES_SHOWN})"


class TaskInline(ReadOnlyInline):
    model = Task
    fields = readonly_fields = ("position", "task_id", "content", "active_form", "status")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "agent_name", "owner", "turn_count", "token_count", "updated_at")
    list_filter = ("agent_name",)
    search_fields = ("id", "title", "owner__username")
    list_select_related = ("owner",)
    readonly_fields = (
        "id",
        "owner",
        "agent_name",
        "token_count",
        "turn_count",
        "tokens_in_total",
        "tokens_out_total",
        "created_at",
        "updated_at",
    )
    fields = ("id", "title", *readonly_fields[1:])
    inlines = [TaskInline, MessageInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # Through the services, so live pages hear of the change like any other.
    def save_model(self, request: HttpRequest, obj: Session, form: Any, change: bool) -> None:
        services.session_update(session=obj, title=obj.title)

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        services.session_delete(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for session in queryset:
            services.session_delete(session=session)
