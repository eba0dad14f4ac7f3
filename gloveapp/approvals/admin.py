"""The approvals in the admin: requests with their decision, and the decisions' audit (CSV).

Read-only: a decision is taken on `/approvals/`, over REST or by expiry, all through
`approval_decide`; the admin shows and exports what was decided.
"""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest

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
        (writer.writerow(row) for row in audit_rows(decisions)), content_type="text/csv"
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


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnly, admin.ModelAdmin):
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
    list_filter = ("status", "decision", "tool_name", "assignee_group")
    search_fields = ("=id", "tool_name", "session__id")
    list_select_related = ("assignee_user", "assignee_group", "session")
    date_hierarchy = "created_at"
    inlines = [DecisionInline]
    actions = ["export_audit"]

    @admin.action(description="Export the decisions of the selected requests as CSV")
    def export_audit(self, request: HttpRequest, queryset: Any) -> HttpResponse:
        return audit_csv(ApprovalDecision.objects.filter(request__in=queryset))


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("request", "kind", "username", "channel", "decided_at")
    list_filter = ("kind", "channel")
    search_fields = ("username", "request__tool_name", "=request__id")
    list_select_related = ("request",)
    actions = ["export_audit"]

    @admin.action(description="Export the selected decisions as CSV")
    def export_audit(self, request: HttpRequest, queryset: Any) -> HttpResponse:
        return audit_csv(queryset)
