"""Websocket routes; each app contributes its own list."""

from __future__ import annotations

from gloveapp.pages.routing import (
    websocket_urlpatterns as conversations_websocket_urlpatterns,
)

websocket_urlpatterns: list = [*conversations_websocket_urlpatterns]
