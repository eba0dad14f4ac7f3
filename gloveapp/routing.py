"""Websocket routes; each app contributes its own list."""

from __future__ import annotations

from gloveapp.pages.routing import (
    websocket_urlpatterns as pages_websocket_urlpatterns,
)

websocket_urlpatterns: list = [*pages_websocket_urlpatterns]
