"""The workspace inbox's REST routes (its MCP server is mounted in asgi.py, at /mcp/<id>).

Included after the webhooks' `inbox/resolve`, so that word is never read as an entry id.
"""

from __future__ import annotations

from django.urls import path

from gloveapp.api.mcp import inbox

urlpatterns = [
    path("inbox/history", inbox.InboxHistoryApi.as_view(), name="workspace-inbox-history"),
    path("inbox/seed", inbox.InboxSeedApi.as_view(), name="workspace-inbox-seed"),
    path(
        "inbox/<str:entry_id>/read",
        inbox.InboxEntryReadApi.as_view(),
        name="workspace-inbox-read",
    ),
    path(
        "inbox/<str:entry_id>",
        inbox.InboxEntryApi.as_view(),
        name="workspace-inbox-entry",
    ),
    path(
        "workspaces/<str:workspace_id>/file",
        inbox.WorkspaceFileApi.as_view(),
        name="workspace-file",
    ),
]
