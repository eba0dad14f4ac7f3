"""Websocket routes of the conversations app."""

from __future__ import annotations

from django.urls import path

from gloveapp.conversations.consumers import SessionConsumer

websocket_urlpatterns = [
    path("ws/sessions/<str:session_id>/", SessionConsumer.as_asgi()),
]
