"""Websocket routes of the pages (the chat page's live socket)."""

from __future__ import annotations

from django.urls import path

from gloveapp.pages.consumers import SessionConsumer

websocket_urlpatterns = [
    path("ws/sessions/<str:session_id>/", SessionConsumer.as_asgi()),
]
