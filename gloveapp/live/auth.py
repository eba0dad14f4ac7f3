"""Who is on the other end of a websocket: the Django login, read once when it connects.

Channels' `AuthMiddlewareStack` also wraps the socket's `send` so that a session changed
while answering is saved with the response: right for HTTP, nothing for a socket, which
never changes the session. On a busy stream that check ran for every socket on every event
(profiled at 1,000 sockets: about a sixth of a relay's fan-out). This stack reads the
session and the user the same way (`channels.auth.get_user`: the login's backend, its
session hash) and leaves `send` alone.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.auth import get_user
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings


class LoginMiddleware(BaseMiddleware):
    """`scope["session"]` and `scope["user"]` from the login cookie, when the socket connects."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        scope = dict(scope)
        session_key = scope.get("cookies", {}).get(settings.SESSION_COOKIE_NAME)
        scope["session"] = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        scope["user"] = await get_user(scope)
        return await super().__call__(scope, receive, send)


def LoginMiddlewareStack(inner: Any) -> Any:  # named like Channels' stacks
    return CookieMiddleware(LoginMiddleware(inner))
