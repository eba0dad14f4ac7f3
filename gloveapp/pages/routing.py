"""Websocket routes of the pages (the chat page's and the inbox page's live sockets)."""

from __future__ import annotations

from django.urls import path

from gloveapp.pages.approvals_consumer import ApprovalsConsumer
from gloveapp.pages.consumers import SessionConsumer
from gloveapp.pages.handoffs_consumer import HandoffsConsumer
from gloveapp.pages.workspace_consumer import WorkspaceConsumer

websocket_urlpatterns = [
    path("ws/sessions/<str:session_id>/", SessionConsumer.as_asgi()),
    path("ws/workspaces/<str:workspace_id>/", WorkspaceConsumer.as_asgi()),
    path("ws/approvals/", ApprovalsConsumer.as_asgi()),
    path("ws/handoffs/", HandoffsConsumer.as_asgi()),
    path("ws/handoffs/<str:group>/", HandoffsConsumer.as_asgi()),
]
