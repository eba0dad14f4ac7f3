"""Conversations in the Django admin, read-only: history is written by agents, not by hand.

A session's page is a view-only transcript (`transcript.py`, drawn by the template
admin/conversations/session/transcript.html of this app): its facts, its tasks and the
conversation, each message's JSON folded away; no Save or Delete. Renaming it is a link away
(`?edit=1`, the change form).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince

from gloveapp.conversations import handoff, selectors, services
from gloveapp.conversations.models import HandoffRecord, Message, Session, Task
from gloveapp.conversations.transcript import session_transcript
from gloveapp.lib.admin import ExactValueFilter, FixedChoicesFilter, ScaleAdmin

# A session page shows the newest messages only; a long history would make it unusable.
MESSAGES_SHOWN = 200
ID_CHARS = 14
TITLE_CHARS = 40


def cut_with_title(value: str, limit: int) -> str:
    """`value` cut to `limit` characters with an ellipsis; the whole of it on hover."""
    shown = value if len(value) <= limit else value[: limit - 1] + "\u2026"
    return format_html('<span title="{}">{}</span>', value, shown)


def ago(moment: Any) -> str:
    if moment is None:
        return "\u2014"
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment, depth=1)} ago"


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


HANDOFF_AUDIT_ROWS = 20


class TaskInline(ReadOnlyInline):
    model = Task
    fields = readonly_fields = ("position", "task_id", "content", "active_form", "status")


class AgentFilter(FixedChoicesFilter):
    """The configured agents (GLOVE_AGENTS), not a DISTINCT over a million sessions."""

    title = "agent"
    parameter_name = "agent"
    field = "agent_name"

    def fixed_choices(self) -> list[tuple[str, str]]:
        return [(name, name) for name in sorted(getattr(settings, "GLOVE_AGENTS", {}) or {})]


@admin.register(Session)
class SessionAdmin(ScaleAdmin):
    # Readable at 1280 px: long ids and titles are cut (the whole value on hover), times
    # are ages; exact values are on the session's page.
    list_display = (
        "short_title",
        "shown_id",
        "agent",
        "owner",
        "turns",
        "tokens",
        "updated",
        "created",
    )
    list_display_links = ("short_title",)

    class Media:
        css = {"all": ["glove/admin-lists.css"]}

    # Newest first on `session_created_idx` (created_at, id); `updated_at` has no index on
    # purpose (an append changes it: the row's updates stay HOT), so it is shown, not sorted.
    ordering = ("-created_at",)
    sortable_by = ("shown_id", "created")
    list_filter = (AgentFilter, ("parent", admin.EmptyFieldListFilter))
    # An exact id or its beginning (the primary key's pattern index), the owner's exact
    # username, words of the title (a trigram index on PostgreSQL).
    search_exact = ("id",)
    search_prefix = ("id",)
    search_text = ("title",)
    search_usernames = ("owner",)
    search_help_text = "A session id or its beginning, an owner's username, or words of the title."
    list_select_related = ("owner",)
    readonly_fields = (
        "id",
        "key",
        "owner",
        "agent_name",
        "parent",
        "parent_call_id",
        "subagent_sessions",
        "token_count",
        "turn_count",
        "tokens_in_total",
        "tokens_out_total",
        "created_at",
        "updated_at",
    )
    # Several to a line: the page is for the conversation below them.
    fields = (
        ("id", "key", "owner", "agent_name"),
        ("parent", "parent_call_id"),
        "subagent_sessions",
        "title",
        ("token_count", "turn_count", "tokens_in_total", "tokens_out_total"),
        ("created_at", "updated_at"),
    )
    inlines = [TaskInline]

    @admin.display(description="who answers")
    def who_answers(self, obj: Session) -> str:
        return handoff.answerer_words(obj)

    @admin.display(description="handoffs (newest first)")
    def handoff_audit(self, obj: Session) -> str:
        """The chat's last changes of who answers and notes: who, when, why."""
        rows = (
            HandoffRecord.objects.filter(session_id=obj.pk)
            .order_by("-id")
            .values_list("created_at", "kind", "actor_label", "via", "reason", "text")[
                :HANDOFF_AUDIT_ROWS
            ]
        )
        items = format_html_join(
            "",
            "<li>{} · {} by {} ({}){}{}</li>",
            (
                (
                    created.strftime("%Y-%m-%d %H:%M:%S"),
                    HandoffRecord.Kind(kind).label,
                    actor or "someone",
                    via or "-",
                    f" · why: {reason}" if reason else "",
                    f" · {text}" if text else "",
                )
                for created, kind, actor, via, reason, text in rows
            ),
        )
        return format_html("<ul>{}</ul>", items) if items else "\u2014"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="subagent sessions")
    def subagent_sessions(self, session: Session) -> str:
        """The sessions this session's agent delegated to (a field, not an inline: there is
        nothing to edit in them here)."""
        children = selectors.session_children(session)
        if not children:
            return "—"
        return format_html_join(
            mark_safe("<br>"),
            '<a href="{}">{}</a> ({})',
            (
                (
                    reverse("admin:conversations_session_change", args=[quote(c.pk)]),
                    c.pk,
                    c.agent_name,
                )
                for c in children
            ),
        )

    @admin.display(description="id", ordering="id")
    def shown_id(self, session: Session) -> str:
        """The global id; its owner's own id beside it when the two differ (it was taken)."""
        full = session.id if session.key == session.id else f"{session.id} (owner's: {session.key})"
        return cut_with_title(full, ID_CHARS)

    @admin.display(description="title", ordering="title")
    def short_title(self, session: Session) -> str:
        return cut_with_title(session.title or "(untitled)", TITLE_CHARS)

    @admin.display(description="agent", ordering="agent_name")
    def agent(self, session: Session) -> str:
        return session.agent_name or "\u2014"

    @admin.display(description="turns", ordering="turn_count")
    def turns(self, session: Session) -> int:
        return session.turn_count

    @admin.display(description="tokens", ordering="token_count")
    def tokens(self, session: Session) -> int:
        return session.token_count

    @admin.display(description="updated")
    def updated(self, session: Session) -> str:
        return ago(session.updated_at)

    @admin.display(description="created", ordering="created_at")
    def created(self, session: Session) -> str:
        return ago(session.created_at)

    # A session's page is its transcript, view-only (facts, tasks, the conversation); the
    # change form is only for renaming it (`?edit=1`, linked from the transcript).
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        if request.method == "GET" and "edit" not in request.GET:
            return self.transcript_view(request, object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def transcript_view(self, request: HttpRequest, object_id: str) -> Any:
        session = self.get_object(request, unquote(object_id))
        if session is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_or_change_permission(request, session):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": session.title or "(untitled)",
            "session": session,
            "transcript": session_transcript(session, newest=MESSAGES_SHOWN),
            "tasks": list(Task.objects.filter(session=session).order_by("position")),
            "subagents": self.subagent_sessions(session),
            "may_rename": self.has_change_permission(request, session),
            "who_answers": self.who_answers(session),
            "handoff_audit": self.handoff_audit(session),
        }
        return TemplateResponse(request, "admin/conversations/session/transcript.html", context)

    # Through the services, so live pages hear of the change like any other.
    def save_model(self, request: HttpRequest, obj: Session, form: Any, change: bool) -> None:
        services.session_update(session=obj, title=obj.title)

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        services.session_delete(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for session in queryset:
            services.session_delete(session=session)


class SessionIdFilter(ExactValueFilter):
    title = "session id"
    parameter_name = "session"
    field = "session_id"
    placeholder = "an exact session id"


class SenderFilter(FixedChoicesFilter):
    title = "sender"
    parameter_name = "sender"
    field = "sender"

    def fixed_choices(self) -> list[tuple[str, str]]:
        return list(Message.SENDERS)


@admin.register(Message)
class MessageAdmin(ScaleAdmin):
    """Every session's messages, read-only, newest first; one session's in its order.

    Unfiltered, the list runs backwards on the primary key; with a session it runs backwards
    on `message_unique_seq` (session, seq). No search in the text: a trigram index over
    every message would weigh on the hottest writes; a session's page shows its transcript."""

    list_display = ("short_text", "session_link", "seq", "sender", "kind", "created")
    list_display_links = ("short_text",)
    list_filter = (SessionIdFilter, SenderFilter)
    sortable_by = ()
    search_exact = ("session_id", "id")
    search_help_text = "An exact session id (or a message's number)."
    fields = readonly_fields = (
        "session",
        "seq",
        "sender",
        "msg_id",
        "text",
        "content",
        "tool_calls",
        "tool_results",
        "is_compaction",
        "is_skill_injection",
        "framework_context",
        "reasoning_content",
        "extra",
        "created_at",
    )

    class Media:
        css = {"all": ["glove/admin-lists.css"]}

    def get_ordering(self, request: HttpRequest) -> list[str]:
        if request.GET.get(SessionIdFilter.parameter_name) or request.GET.get("q"):
            # One session's: exactly `message_unique_seq` backwards (and a total order: no
            # id added). Newest first by id would walk the whole table backwards to reach
            # an old session's rows.
            return ["-session_id", "-seq"]
        return ["-id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        # The list needs none of the large columns; the page of one message reads them all.
        queryset = super().get_queryset(request)
        if getattr(request, "resolver_match", None) and request.resolver_match.url_name.endswith(
            "_changelist"
        ):
            return queryset.only(
                "id",
                "session_id",
                "seq",
                "sender",
                "text",
                "is_compaction",
                "is_skill_injection",
                "framework_context",
                "created_at",
            )
        return queryset

    @admin.display(description="text")
    def short_text(self, message: Message) -> str:
        return cut_with_title(message.text or "(no text)", 80)

    @admin.display(description="session")
    def session_link(self, message: Message) -> str:
        url = reverse("admin:conversations_session_change", args=[quote(message.session_id)])
        return format_html('<a href="{}">{}</a>', url, cut_with_title(message.session_id, ID_CHARS))

    @admin.display(description="kind")
    def kind(self, message: Message) -> str:
        if message.is_compaction:
            return "compaction"
        if message.is_skill_injection:
            return "skill"
        return message.framework_context or "\u2014"

    @admin.display(description="created")
    def created(self, message: Message) -> str:
        return ago(message.created_at)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
