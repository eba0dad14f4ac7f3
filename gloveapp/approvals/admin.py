"""The approvals in the admin: requests with their decision, and the decisions' audit (CSV).

The rows are read-only; the actions approve or reject open requests as they are (channel
"admin"), through `approval_decide` like every other path. Edits are made on `/approvals/`.
"""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.approvals.services import (
    ApprovalConflict,
    ApprovalNotFound,
    DecisionInvalid,
    NotYoursToDecide,
    approval_decide,
)
from gloveapp.core.approvals.decisions import APPROVE, DECISIONS, REJECT, Decision
from gloveapp.core.escaping import csv_row
from gloveapp.lib.admin import ExactValueFilter, FixedChoicesFilter, ScaleAdmin

AUDIT_COLUMNS = (
    "request",
    "tool",
    "session",
    "decision",
    "by",
    "channel",
    "decided_at",
    "fingerprint_seen",
    "request_fingerprint",
    "args",
    "edited_args",
    "reason",
    "text",
)


class _Echo:
    def write(self, value: str) -> str:
        return value


def audit_rows(decisions: Any) -> Any:
    import json

    yield AUDIT_COLUMNS
    for decision in decisions.select_related("request").order_by("decided_at", "id").iterator():
        request = decision.request
        yield (
            str(request.pk),
            request.tool_name,
            request.session_id,
            decision.kind,
            decision.username,
            decision.channel,
            decision.decided_at.isoformat(),
            decision.fingerprint_seen,
            request.fingerprint,
            json.dumps(request.args, ensure_ascii=False),
            json.dumps(decision.args, ensure_ascii=False) if decision.args is not None else "",
            decision.reason,
            decision.text,
        )


def audit_csv(decisions: Any) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        # Every cell neutralised: a reason or argument like `=HYPERLINK(…)` stays text.
        (writer.writerow(csv_row(row)) for row in audit_rows(decisions)),
        content_type="text/csv",
    )
    response["Content-Disposition"] = 'attachment; filename="approval-decisions.csv"'
    return response


class ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class DecisionInline(ReadOnly, admin.StackedInline):
    model = ApprovalDecision
    can_delete = False
    extra = 0
    readonly_fields = (
        "kind",
        "username",
        "channel",
        "decided_at",
        "fingerprint_seen",
        "args",
        "reason",
        "text",
    )
    fields = readonly_fields


class DecisionFilter(FixedChoicesFilter):
    """The decisions there are (gloveapp.core.approvals), not a DISTINCT over the requests."""

    title = "decision"
    parameter_name = "decision"
    field = "decision"

    def fixed_choices(self) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in DECISIONS]


class ToolFilter(ExactValueFilter):
    title = "tool"
    parameter_name = "tool_name"
    field = "tool_name"
    placeholder = "an exact tool name"


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnly, ScaleAdmin):
    list_display = (
        "tool_name",
        "status",
        "decision",
        "assignee_user",
        "assignee_group",
        "created_at",
        "expires_at",
        "session",
    )
    # Newest first on `approval_created_idx` (created_at, id); with a status, on
    # `approval_status_created_idx`. The groups are few: their filter lists them.
    ordering = ("-created_at", "-id")
    sortable_by = ("created_at",)
    list_filter = ("status", DecisionFilter, ToolFilter, "assignee_group")
    # A request's id (a UUID), an exact tool name, an exact session id.
    search_exact = ("id", "tool_name", "session_id")
    search_help_text = "A request's id, an exact tool name, or an exact session id."
    list_select_related = ("assignee_user", "assignee_group", "session")
    inlines = [DecisionInline]
    actions = ["approve_selected", "reject_selected", "export_audit"]

    def _decide(self, request: HttpRequest, queryset: Any, kind: str) -> None:
        decided, refused = 0, []
        for row in queryset.filter(status=ApprovalRequest.Status.OPEN):
            decision = Decision(
                kind,
                row.fingerprint,
                reason="Rejected in the admin." if kind == REJECT else None,
            )
            try:
                approval_decide(
                    request_id=row.pk, decision=decision, user=request.user, channel="admin"
                )
            except (ApprovalConflict, ApprovalNotFound, DecisionInvalid, NotYoursToDecide) as error:
                refused.append(f"{row.tool_name} {row.pk}: {error}")
                continue
            decided += 1
        if decided:
            self.message_user(request, f"{kind.capitalize()}d {decided} request(s).")
        for line in refused:
            self.message_user(request, line, level=messages.WARNING)

    @admin.action(description="Approve the selected open requests (as they are)")
    def approve_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, APPROVE)

    @admin.action(description="Reject the selected open requests")
    def reject_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, REJECT)

    @admin.action(description="Export the decisions of the selected requests as CSV")
    def export_audit(self, request: HttpRequest, queryset: Any) -> HttpResponse:
        return audit_csv(ApprovalDecision.objects.filter(request__in=queryset))


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnly, ScaleAdmin):
    list_display = ("request", "kind", "username", "channel", "decided_at")
    # Newest first on `approval_decision_decided_idx` (decided_at, id).
    ordering = ("-decided_at", "-id")
    sortable_by = ("decided_at",)
    list_filter = ("kind", "channel")
    # The request's id (its one-to-one key), the decider's exact username (their ids).
    search_exact = ("request_id",)
    search_usernames = ("user",)
    search_help_text = "A request's id, or the decider's exact username."
    list_select_related = ("request",)
    actions = ["export_audit"]

    @admin.action(description="Export the selected decisions as CSV")
    def export_audit(self, request: HttpRequest, queryset: Any) -> HttpResponse:
        return audit_csv(queryset)
