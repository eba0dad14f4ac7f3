"""The mesh in the admin: who is registered, and the traffic (every `mesh:` inbox item).

Traffic is the inbox items whose tag starts with `mesh:` in any agent's store (a proxy of
`inbox.InboxItem`), filterable by sender (from the tag), recipient (the session that holds the
item: `mesh:<agent id>` for mesh peers) and state. Read-only: items are written by agents.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.html import format_html

from gloveapp.lib.admin import ExactValueFilter, ScaleAdmin, usable
from inbox.models import ADMIN_ORDER, MESH_TAG
from mesh.models import MeshAgent, MeshDelivery, MeshRefusal, MeshTraffic

SENDER_PREFIXES = ("mesh:from:", "mesh:broadcast:from:")


def sender_of(tag: str) -> str:
    for prefix in SENDER_PREFIXES:
        if tag.startswith(prefix):
            return tag[len(prefix) :]
    return ""  # mesh:waiting:<id> is this agent's own pending send


class MeshRecordAdmin(ScaleAdmin):
    """What the mesh wrote, listed and searched: never added or edited here, and deleted only
    where `deletable` says so."""

    deletable = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return self.deletable and super().has_delete_permission(request, obj)


class SenderFilter(ExactValueFilter):
    """A sender's agent id typed in (a list of them was a DISTINCT over every item's tag)."""

    title = "sender"
    parameter_name = "sender"
    placeholder = "a sender's agent id"

    def queryset(self, request, queryset: QuerySet) -> QuerySet:
        sender = (self.value() or "").strip()
        if not sender:
            return queryset
        if not usable(sender):
            return queryset.none()
        return queryset.filter(
            Q(tag=f"mesh:from:{sender}") | Q(tag=f"mesh:broadcast:from:{sender}")
        )


class RecipientFilter(ExactValueFilter):
    """The session that holds the items (`mesh:<agent id>` for mesh peers), typed in."""

    title = "recipient"
    parameter_name = "recipient"
    field = "session_id"
    placeholder = "a session id, e.g. mesh:<agent id>"


class ExactFieldFilter(ExactValueFilter):
    placeholder = "an exact agent id"


def exact_filter(name: str) -> type[ExactValueFilter]:
    return type(
        f"{name.title()}Filter",
        (ExactFieldFilter,),
        {"title": name, "parameter_name": name, "field": name},
    )


@admin.register(MeshTraffic)
class MeshTrafficAdmin(MeshRecordAdmin):
    # Readable at 1280 px beside the admin's sidebar: long ids are shortened (the full one is
    # the cell's title and the search finds it), long values wrap inside their cells.
    list_display = (
        "short_id",
        "kind",
        "sender",
        "recipient",
        "status",
        "short_response",
        "created",
    )
    list_display_links = ("short_id",)
    # The recipient's title is read with each row (one join, the page's rows only).
    list_select_related = ("session",)
    list_filter = (SenderFilter, RecipientFilter, "status")
    sortable_by = ()
    search_exact = ("id", "session_id", "tag")
    search_prefix = ("id",)
    search_text = ("request",)
    search_help_text = (
        "An item id or its beginning, an exact session id or tag, or words of the request."
    )

    class Media:
        css = {"all": ["glove/admin-lists.css"]}

    @admin.display(description="id", ordering="id")
    def short_id(self, item: MeshTraffic) -> str:
        return format_html('<span title="{}">{}</span>', item.id, _short(item.id))

    @admin.display(description="created", ordering="created_at")
    def created(self, item: MeshTraffic) -> str:
        when = timezone.localtime(item.created_at)
        return format_html(
            '<time datetime="{}" title="{}">{}</time>',
            when.isoformat(timespec="seconds"),
            when.isoformat(timespec="seconds"),
            f"{when:%-d %b %H:%M}",
        )

    @admin.display(description="recipient", ordering="session")
    def recipient(self, item: MeshTraffic) -> str:
        session = item.session
        return format_html(
            '<span title="{}">{}</span>', session.pk, session.title or _short(session.pk)
        )

    def get_queryset(self, request):
        return super().get_queryset(request).filter(tag__startswith=MESH_TAG)

    def get_ordering(self, request):
        # The inbox's order and its index (inbox.models.ADMIN_ORDER).
        return list(ADMIN_ORDER)

    @admin.display(description="kind")
    def kind(self, item: MeshTraffic) -> str:
        if item.tag.startswith("mesh:waiting:"):
            return "waiting"
        return "broadcast" if item.tag.startswith("mesh:broadcast:") else "message"

    @admin.display(description="sender")
    def sender(self, item: MeshTraffic) -> str:
        return sender_of(item.tag) or "(this agent)"

    @admin.display(description="response")
    def short_response(self, item: MeshTraffic) -> str:
        text = item.response or item.request
        return text if len(text) <= 80 else text[:79] + "\u2026"


def _short(value: str, keep: int = 14) -> str:
    """A long id as people scan it: its start and its end ("inbox_17f3…9c2a41")."""
    return value if len(value) <= keep else f"{value[: keep - 7]}\u2026{value[-6:]}"


@admin.register(MeshAgent)
class MeshAgentAdmin(MeshRecordAdmin):
    list_display = ("agent_id", "name", "description", "capabilities", "registered_at")
    # On the primary key: an agent id or its beginning (a registry, not a log).
    sortable_by = ("agent_id",)
    search_exact = ("agent_id",)
    search_prefix = ("agent_id",)
    search_help_text = "An agent id or its beginning."
    # An agent that will not come back may be taken off the registry.
    deletable = True


@admin.register(MeshDelivery)
class MeshDeliveryAdmin(MeshRecordAdmin):
    list_display = ("message_id", "kind", "sender", "recipient", "delivered_at")
    # Newest first on the primary key; one recipient's on `mesh_delivery_cursor_idx`.
    ordering = ("-id",)
    sortable_by = ()
    list_filter = ("kind", exact_filter("sender"), exact_filter("recipient"))
    # A message id (`mesh_delivery_once_per_recipient` starts with it) or a recipient.
    search_exact = ("message_id", "recipient")
    search_help_text = "An exact message id or recipient agent id."


@admin.register(MeshRefusal)
class MeshRefusalAdmin(MeshRecordAdmin):
    """Frames the recipients refused, by reason (`mesh.core.security`); deletable to reset."""

    list_display = ("reason", "count", "last_at")
    deletable = True
