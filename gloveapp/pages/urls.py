"""The HTMX chat pages."""

from __future__ import annotations

from django.urls import path

from gloveapp.pages import account, approvals, handoffs, views, workspace_inbox

urlpatterns = [
    path("", views.session_list, name="session-list"),
    path("sessions/new", views.session_new, name="session-new"),
    path("sessions/<str:session_id>/", views.chat, name="chat"),
    path("sessions/<str:session_id>/messages", views.message_create, name="message-create"),
    path("sessions/<str:session_id>/history", views.chat_history, name="chat-history"),
    path("sessions/<str:session_id>/slots/<str:slot_id>", views.slot_answer, name="slot-answer"),
    path("sessions/<str:session_id>/cancel", views.turn_cancel, name="turn-cancel"),
    path(
        "sessions/<str:session_id>/tool-results/<str:call_id>",
        views.tool_result_download,
        name="tool-result-download",
    ),
    path(
        "sessions/<str:session_id>/turns/<int:turn_id>/withdraw",
        views.turn_withdraw,
        name="turn-withdraw",
    ),
    path(
        "sessions/<str:session_id>/permissions/reset",
        views.permission_reset,
        name="permission-reset",
    ),
    path("inbox/", workspace_inbox.inbox_page, name="workspace-inbox"),
    path(
        "inbox/entries/<str:entry_id>",
        workspace_inbox.entry_detail,
        name="workspace-inbox-detail",
    ),
    path(
        "inbox/entries/<str:entry_id>/read",
        workspace_inbox.entry_read,
        name="workspace-inbox-mark-read",
    ),
    path(
        "inbox/entries/<str:entry_id>/reply",
        workspace_inbox.entry_reply,
        name="workspace-inbox-reply",
    ),
    path("approvals/", approvals.approvals_page, name="approvals"),
    path("approvals/link/<str:token>", approvals.approval_link, name="approval-link"),
    path("approvals/<str:approval_id>", approvals.approval_detail, name="approval-detail"),
    path(
        "approvals/<str:approval_id>/decide",
        approvals.approval_decide_page,
        name="approval-decide",
    ),
    path("sessions/<str:session_id>/handoff", handoffs.handoff_request, name="handoff-request"),
    path("handoffs/", handoffs.console_page, name="handoffs"),
    path("handoffs/<str:session_id>", handoffs.chat_detail, name="handoff-detail"),
    *(
        path(
            f"handoffs/<str:session_id>/{action}",
            handoffs.chat_action,
            {"action": action},
            name=f"handoff-{action}",
        )
        for action in handoffs.ACTIONS
    ),
    path("notifications/", workspace_inbox.notifications_page, name="notifications"),
    path("accounts/tokens/", account.api_tokens, name="api-tokens"),
    path("accounts/tokens/new", account.api_token_create, name="api-token-create"),
    path("accounts/tokens/revoke", account.api_token_revoke, name="api-token-revoke"),
]
