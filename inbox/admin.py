"""The inbox in the Django admin: staff see what waits, and resolve it.

Pending items come first. An item's page has a Response field while it is pending; the
"Resolve selected" action asks for one response on an intermediate page. Both call the one
resolve service with resolved_by="user" and the staff member, so a race with any other
resolver ends in a clear "already resolved" message, never an overwrite. Nothing else about
an item can be edited here: items are written by agents, not by hand.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.timesince import timesince

from gloveapp.conversations.admin import cut_with_title
from gloveapp.core import input_rules
from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from gloveapp.lib.admin import ExactValueFilter, ScaleAdmin
from inbox.models import ADMIN_ORDER, MESH_KINDS, MESH_TAG, InboxItem
from inbox.services import inbox_item_resolve

Status = InboxItem.Status


def check_response(response: str) -> str:
    if not response.strip():
        raise forms.ValidationError("Enter the response to send to the agent.")
    if input_rules.contains_nul(response):
        raise forms.ValidationError("The response must not contain NUL characters.")
    return response


class ResolveForm(forms.Form):
    response = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        strip=False,
        help_text="The agent reads this text on its next turn.",
    )

    def clean_response(self) -> str:
        return check_response(self.cleaned_data["response"])


class InboxItemAdminForm(forms.ModelForm):
    """Every model field is read-only; `resolution` is the only input (pending items only)."""

    resolution = forms.CharField(
        label="Response",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="Resolve this item: the agent reads this text on its next turn.",
    )

    # Only for items that declare decisions (approve/reject/respond); blank: a text response.
    decide = forms.ChoiceField(
        choices=[("", "Respond with the text"), ("approve", "Approve"), ("reject", "Reject")],
        required=False,
        help_text="Approve or Reject: the text above, if any, is the reason the agent reads.",
    )

    class Meta:
        model = InboxItem
        fields: list[str] = []

    def clean_resolution(self) -> str:
        response = self.cleaned_data["resolution"]
        return check_response(response) if response else response


def _resolve(
    request: HttpRequest, item_id: str, response: str, decision: str | None = None
) -> tuple[bool, str]:
    if decision:  # approve / reject: the text is the reason
        answer: dict[str, Any] = {"decision": decision, "reason": response or None}
    else:
        answer = {"response": response}
    try:
        inbox_item_resolve(item_id=item_id, resolved_by="user", user=request.user, **answer)
    except (InboxItemNotFound, InboxTransitionError, ValueError) as exc:
        # ValueError: an item that asks for a decision (approve/reject) refuses plain text.
        return False, str(exc)
    return True, f'Resolved inbox item "{item_id}".'


TAG_CHARS = 24


class KindFilter(admin.SimpleListFilter):
    """What an item is, from its tag's convention (mesh §9.4) and how it was resolved."""

    title = "kind"
    parameter_name = "kind"
    KINDS: dict[str, tuple[str, Q]] = {
        # Each a partial index of its own (inbox.models.MESH_KINDS).
        "plain": ("plain", ~Q(tag__startswith=MESH_TAG)),
        "mesh_direct": ("mesh direct", Q(tag__startswith=MESH_KINDS["mesh_direct"])),
        "mesh_broadcast": ("mesh broadcast", Q(tag__startswith=MESH_KINDS["mesh_broadcast"])),
        "waiting": ("mesh waiting", Q(tag__startswith=MESH_KINDS["waiting"])),
        "expired": ("expired", Q(resolved_by=InboxItem.ResolvedBy.EXPIRY)),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in self.KINDS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[InboxItem]) -> Any:
        kind = self.KINDS.get(self.value() or "")
        return queryset.filter(kind[1]) if kind else queryset


class SessionIdFilter(ExactValueFilter):
    """An exact session id typed in: the list of every session with an item was 592,890
    links (a DISTINCT over the table) at a million items."""

    title = "session id"
    parameter_name = "session__id__exact"  # the name the related filter it replaces had
    field = "session_id"
    placeholder = "an exact session id"


def _ago(moment) -> str:
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment, depth=1)} ago"


@admin.register(InboxItem)
class InboxItemAdmin(ScaleAdmin):
    form = InboxItemAdminForm
    # Compact columns: beside the admin's sidebar and the filters, ten raw columns (full ids,
    # full dates) ran off a 1280-1440 px screen. Ids, exact times and expiry are on the
    # item's page.
    list_display = (
        "short_request",
        "short_tag",
        "state",
        "short_session",
        "asked",
        "resolution",
    )
    list_display_links = ("short_request",)

    class Media:
        css = {"all": ["glove/admin-lists.css"]}

    # By kind, not by tag: mesh tags are unique per message, so a tag filter grew by one
    # entry per message.
    list_filter = (
        "status",
        KindFilter,
        "blocking",
        "resolved_by",
        SessionIdFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    # Pending first, then newest first: one backward range scan of `inbox_admin_order_idx`,
    # an index on this very ordering (inbox.models.ADMIN_ORDER).
    sortable_by = ()
    # An item's exact id or its beginning (the primary key's pattern index), its session's
    # exact id, words of the request (a trigram index on PostgreSQL).
    search_exact = ("id", "session_id")
    search_prefix = ("id",)
    search_text = ("request",)
    search_help_text = "An item id or its beginning, an exact session id, or words of the request."
    actions = ["resolve_selected"]
    readonly_fields = (
        "id",
        # The id its session's side knows it by (the same as `id` unless that was taken).
        "key",
        "session",
        "tag",
        "request",
        "blocking",
        "status",
        "created_at",
        "expires_at",
        "response",
        "resolved_at",
        "resolved_by",
        "resolved_by_user",
        "consumed_at",
        "decisions",
        "decision",
    )

    @admin.display(description="request")
    def short_request(self, item: InboxItem) -> str:
        return item.request if len(item.request) <= 60 else item.request[:59] + "…"

    @admin.display(description="tag")
    def short_tag(self, item: InboxItem) -> str:
        return cut_with_title(item.tag, TAG_CHARS)

    @admin.display(description="status")
    def state(self, item: InboxItem) -> str:
        label = item.get_status_display()
        return f"{label}, blocking" if item.blocking else label

    @admin.display(description="session")
    def short_session(self, item: InboxItem) -> str:
        return cut_with_title(item.session_id or "", 14)

    @admin.display(description="asked")
    def asked(self, item: InboxItem) -> str:
        return _ago(item.created_at)

    @admin.display(description="resolved")
    def resolution(self, item: InboxItem) -> str:
        if item.resolved_at is None:
            return "—"
        return f"{item.resolved_by or '?'}, {_ago(item.resolved_at)}"

    def get_ordering(self, request: HttpRequest) -> list[Any]:
        return list(ADMIN_ORDER)

    def get_fieldsets(self, request: HttpRequest, obj: InboxItem | None = None) -> Any:
        fieldsets: list[Any] = [
            (
                None,
                {"fields": ("id", "session", "tag", "request", "blocking", "status", "decisions")},
            ),
            ("Timing", {"fields": ("created_at", "expires_at")}),
            (
                "Resolution",
                {
                    "fields": (
                        "decision",
                        "response",
                        "resolved_at",
                        "resolved_by",
                        "resolved_by_user",
                        "consumed_at",
                    )
                },
            ),
        ]
        if (
            obj is not None
            and obj.status == Status.PENDING
            and self.has_change_permission(request, obj)
        ):
            asks = ("decide", "resolution") if obj.decisions else ("resolution",)
            fieldsets.insert(1, ("Resolve", {"fields": asks}))
        return fieldsets

    def get_form(self, request: HttpRequest, obj: InboxItem | None = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)
        if obj is not None and obj.status == Status.PENDING and "resolution" in form.base_fields:
            # An item that declares decisions may be approved or rejected without a text.
            form.base_fields["resolution"].required = not obj.decisions
        return form

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: InboxItem | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: InboxItem, form: Any, change: bool) -> None:
        response = form.cleaned_data.get("resolution")
        decision = form.cleaned_data.get("decide") or None
        if not response and not decision:
            return
        # The service, not obj.save(): the conditional update decides a race with any
        # other resolver; the loser's message replaces Django's "changed successfully".
        ok, message = _resolve(request, obj.pk, response, decision)
        request._inbox_resolution = (ok, message)  # type: ignore[attr-defined]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return None

    def response_change(self, request: HttpRequest, obj: InboxItem) -> HttpResponse:
        outcome = getattr(request, "_inbox_resolution", None)
        if outcome is None:
            return super().response_change(request, obj)
        ok, message = outcome
        self.message_user(request, message, messages.SUCCESS if ok else messages.ERROR)
        return redirect(request.path if not ok else "admin:inbox_inboxitem_changelist")

    @admin.action(description="Resolve selected pending items…", permissions=["change"])
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[InboxItem]) -> Any:
        form = ResolveForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            resolved, refused = 0, []
            for item_id in queryset.order_by("created_at").values_list("pk", flat=True):
                ok, message = _resolve(request, item_id, form.cleaned_data["response"])
                if ok:
                    resolved += 1
                else:
                    refused.append(message)
            if resolved:
                self.message_user(request, f"Resolved {resolved} inbox item(s).", messages.SUCCESS)
            for message in refused:
                self.message_user(request, message, messages.WARNING)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Resolve inbox items",
            "opts": self.model._meta,
            "form": form,
            "items": queryset.order_by("created_at"),
            "pending_count": queryset.filter(status=Status.PENDING).count(),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "action": "resolve_selected",
        }
        return TemplateResponse(request, "admin/inbox/inboxitem/resolve_selected.html", context)


# The workspace inbox registers its own models.
from inbox.workspaces import admin as _workspace_admin  # noqa: E402, F401
