"""Websocket routes; each app contributes its own list.

`RefusingURLRouter` is Channels' `URLRouter` for the outermost routes, except that a path no
route matches (or a scope with no usable path) is refused at the handshake, as a 403 from
any server, instead of raising `ValueError("No route found ...")`, which Daphne and uvicorn
answered with a 500 and a traceback, to anyone.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.routing import URLRouter
from django.urls.exceptions import Resolver404

from gloveapp.pages.routing import (
    websocket_urlpatterns as pages_websocket_urlpatterns,
)

logger = logging.getLogger(__name__)

websocket_urlpatterns: list = [*pages_websocket_urlpatterns]


class RefusingURLRouter(URLRouter):
    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "websocket" and not self.routes_to_something(scope):
            await refuse_handshake(receive, send)
            return
        await super().__call__(scope, receive, send)

    def routes_to_something(self, scope: dict) -> bool:
        path = scope.get("path")
        if not isinstance(path, str):
            return False
        root_path = scope.get("root_path") or ""
        if root_path:
            if not path.startswith(root_path):
                return False
            path = path[len(root_path) :]
        path = path.lstrip("/")
        for route in self.routes:
            try:
                if route.pattern.match(path):
                    return True
            except Resolver404:
                continue
        return False


async def refuse_handshake(receive: Any, send: Any) -> None:
    """Close before accepting: the server answers the upgrade with a 403."""
    message = await receive()
    if message.get("type") == "websocket.connect":
        await send({"type": "websocket.close", "code": 4404})
