"""The remote store's routes: one per `RemoteStoreActions` method, and the endpoint model's.

Paths follow Glove's coffee example where it names them (contract §8.3), so a glove-react
`createRemoteStore` wired to those paths works against this server unchanged.
"""

from __future__ import annotations

from django.urls import path

from gloveapp.api.store import chat, chat_url, inbox, session_data, sessions

urlpatterns = [
    # The session routes first: the remote store's hot paths resolve in fewer tries.
    path("sessions", sessions.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>", sessions.SessionDetailApi.as_view(), name="api-session"),
    path(
        "sessions/<str:session_id>/timeline",
        sessions.SessionTimelineApi.as_view(),
        name="api-session-timeline",
    ),
    path(
        "sessions/<str:session_id>/messages",
        session_data.MessagesApi.as_view(),
        name="api-session-messages",
    ),
    path(
        "sessions/<str:session_id>/tokens",
        session_data.TokensApi.as_view(),
        name="api-session-tokens",
    ),
    path(
        "sessions/<str:session_id>/turns", session_data.TurnsApi.as_view(), name="api-session-turns"
    ),
    path(
        "sessions/<str:session_id>/reset-counters",
        session_data.ResetCountersApi.as_view(),
        name="api-session-reset-counters",
    ),
    path(
        "sessions/<str:session_id>/tasks", session_data.TasksApi.as_view(), name="api-session-tasks"
    ),
    # `path:` because Glove task ids are free text and may hold a slash.
    path(
        "sessions/<str:session_id>/tasks/<path:task_id>",
        session_data.TaskUpdateApi.as_view(),
        name="api-session-task",
    ),
    path(
        "sessions/<str:session_id>/permissions",
        session_data.PermissionsApi.as_view(),
        name="api-session-permissions",
    ),
    path(
        "sessions/<str:session_id>/inbox",
        inbox.InboxApi.as_view(),
        name="api-session-inbox",
    ),
    path(
        "sessions/<str:session_id>/inbox/update",
        inbox.InboxUpdateApi.as_view(),
        name="api-session-inbox-update",
    ),
    path(
        "sessions/<str:session_id>/inbox/resolved",
        inbox.InboxResolvedApi.as_view(),
        name="api-session-inbox-resolved",
    ),
    path(
        "sessions/<str:session_id>/inbox/consume",
        inbox.InboxConsumeApi.as_view(),
        name="api-session-inbox-consume",
    ),
    path(
        "sessions/<str:session_id>/chat-url",
        chat_url.ChatUrlMintApi.as_view(),
        name="api-session-chat-url",
    ),
    path("chat", chat.ChatApi.as_view(), name="api-chat"),
    path("chat/<str:token>", chat_url.SignedChatApi.as_view(), name="api-chat-signed"),
]
