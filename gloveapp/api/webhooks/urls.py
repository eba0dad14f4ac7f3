"""What staff tools and signed webhooks call: approvals and the inbox's resolution."""

from __future__ import annotations

from django.urls import path

from gloveapp.api.webhooks import approvals, inbox_resolve

urlpatterns = [
    path("approvals/", approvals.ApprovalListApi.as_view(), name="api-approvals"),
    path(
        "approvals/<str:approval_id>",
        approvals.ApprovalDetailApi.as_view(),
        name="api-approval",
    ),
    path(
        "approvals/<str:approval_id>/decide",
        approvals.ApprovalDecideApi.as_view(),
        name="api-approval-decide",
    ),
    path("inbox/resolve", inbox_resolve.InboxResolveApi.as_view(), name="inbox-resolve"),
]
