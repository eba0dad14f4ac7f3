"""The REST remote store (DRF), mounted at /api/: one route per `RemoteStoreActions` method.

Paths follow Glove's coffee example where it names them (contract §8.3), so a glove-react
`createRemoteStore` wired to those paths works against this server unchanged.
"""

from __future__ import annotations

from django.urls import path

from gloveapp.api import (
    agent_turns,
    approvals,
    chat,
    chat_url,
    inbox_resolve,
    inbox_views,
    permission_prompts,
    session_events,
    sessions,
    store_views,
    workspace_inbox,
)
from gloveapp.api.turns import TurnCancelApi

urlpatterns = [
    # The session routes first: the remote store's hot paths resolve in fewer tries.
    path("sessions", sessions.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>", sessions.SessionDetailApi.as_view(), name="api-session"),
    path(
        "sessions/<str:session_id>/messages",
        store_views.MessagesApi.as_view(),
        name="api-session-messages",
    ),
    path(
        "sessions/<str:session_id>/tokens",
        store_views.TokensApi.as_view(),
        name="api-session-tokens",
    ),
    path(
        "sessions/<str:session_id>/turns", store_views.TurnsApi.as_view(), name="api-session-turns"
    ),
    path(
        "sessions/<str:session_id>/reset-counters",
        store_views.ResetCountersApi.as_view(),
        name="api-session-reset-counters",
    ),
    path(
        "sessions/<str:session_id>/tasks", store_views.TasksApi.as_view(), name="api-session-tasks"
    ),
    # `path:` because Glove task ids are free text and may hold a slash.
    path(
        "sessions/<str:session_id>/tasks/<path:task_id>",
        store_views.TaskUpdateApi.as_view(),
        name="api-session-task",
    ),
    path(
        "sessions/<str:session_id>/permissions",
        store_views.PermissionsApi.as_view(),
        name="api-session-permissions",
    ),
    path(
        "sessions/<str:session_id>/permission-prompts",
        permission_prompts.PermissionPromptListApi.as_view(),
        name="api-session-permission-prompts",
    ),
    path(
        "sessions/<str:session_id>/permission-prompts/<str:prompt_id>",
        permission_prompts.PermissionPromptAnswerApi.as_view(),
        name="api-session-permission-prompt",
    ),
    path(
        "sessions/<str:session_id>/inbox",
        inbox_views.InboxApi.as_view(),
        name="api-session-inbox",
    ),
    path(
        "sessions/<str:session_id>/inbox/update",
        inbox_views.InboxUpdateApi.as_view(),
        name="api-session-inbox-update",
    ),
    path(
        "sessions/<str:session_id>/inbox/resolved",
        inbox_views.InboxResolvedApi.as_view(),
        name="api-session-inbox-resolved",
    ),
    path(
        "sessions/<str:session_id>/inbox/consume",
        inbox_views.InboxConsumeApi.as_view(),
        name="api-session-inbox-consume",
    ),
    path(
        "sessions/<str:session_id>/chat-url",
        chat_url.ChatUrlMintApi.as_view(),
        name="api-session-chat-url",
    ),
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
    # The workspace inbox, after `inbox/resolve` so that word is never read as an entry id.
    path(
        "inbox/history", workspace_inbox.InboxHistoryApi.as_view(), name="workspace-inbox-history"
    ),
    path("inbox/seed", workspace_inbox.InboxSeedApi.as_view(), name="workspace-inbox-seed"),
    path(
        "inbox/<str:entry_id>/read",
        workspace_inbox.InboxEntryReadApi.as_view(),
        name="workspace-inbox-read",
    ),
    path(
        "inbox/<str:entry_id>",
        workspace_inbox.InboxEntryApi.as_view(),
        name="workspace-inbox-entry",
    ),
    path(
        "workspaces/<str:workspace_id>/file",
        workspace_inbox.WorkspaceFileApi.as_view(),
        name="workspace-file",
    ),
    path("chat", chat.ChatApi.as_view(), name="api-chat"),
    path("chat/<str:token>", chat_url.SignedChatApi.as_view(), name="api-chat-signed"),
    path("sessions/<str:session_id>/cancel", TurnCancelApi.as_view(), name="api-turn-cancel"),
    # The server's agents from any client (issue 33): start a turn, stream it, answer it.
    path(
        "sessions/<str:session_id>/agent/turns",
        agent_turns.AgentTurnStartApi.as_view(),
        name="api-session-agent-turns",
    ),
    path(
        "sessions/<str:session_id>/agent/turns/<str:turn_id>",
        agent_turns.AgentTurnDetailApi.as_view(),
        name="api-session-agent-turn",
    ),
    path(
        "sessions/<str:session_id>/events",
        session_events.session_events,
        name="api-session-events",
    ),
    path(
        "sessions/<str:session_id>/slots",
        agent_turns.SlotListApi.as_view(),
        name="api-session-slots",
    ),
    path(
        "sessions/<str:session_id>/slots/<str:slot_id>",
        agent_turns.SlotAnswerApi.as_view(),
        name="api-session-slot",
    ),
]
