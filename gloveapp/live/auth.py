"""Who is on the other end of a websocket: the Django login, read once when it connects.

Channels' `AuthMiddlewareStack` also wraps the socket's `send` so that a session changed
while answering is saved with the response: right for HTTP, nothing for a socket, which
never changes the session. On a busy stream that check ran for every socket on every event
(profiled at 1,000 sockets: about a sixth of a relay's fan-out). This stack reads the
session and the user the same way (`channels.auth.get_user`: the login's backend, its
session hash) and leaves `send` alone.
"""

from __future__ import annotations

import asyncio
from importlib import import_module
from typing import Any

from channels.auth import get_user
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser

from gloveapp.lib.db.outages import is_database_outage

# Set in a socket's scope when its login could not be read (the database did not answer).
LOGIN_UNAVAILABLE = "glove_login_unavailable"
LOGIN_READ_TIMEOUT_SECONDS = 3


class LoginMiddleware(BaseMiddleware):
    """`scope["session"]` and `scope["user"]` from the login cookie, when the socket connects."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        scope = dict(scope)
        session_key = scope.get("cookies", {}).get(settings.SESSION_COOKIE_NAME)
        scope["session"] = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        user = await _login_or_none(scope)
        if user is None:
            # The consumer closes the socket with "not now" (4503) instead of the handshake
            # failing, which a browser would take for a network error.
            scope["user"] = AnonymousUser()
            scope[LOGIN_UNAVAILABLE] = True
        else:
            scope["user"] = user
        return await super().__call__(scope, receive, send)


async def _login_or_none(scope: dict) -> Any:
    """The socket's user (AnonymousUser without a login), or None when the database did
    not answer in time. Bounded: with the database away, the pool waits for a connection
    longer than a server waits for a handshake (Daphne drops it after 5 s). The read runs
    in a thread that cannot be interrupted; it is left to finish, its answer unused."""
    reading = asyncio.ensure_future(get_user(scope))
    done, _ = await asyncio.wait({reading}, timeout=LOGIN_READ_TIMEOUT_SECONDS)
    if not done:
        reading.add_done_callback(_forget)
        return None
    error = reading.exception()
    if error is None:
        return reading.result()
    if is_database_outage(error):
        return None
    raise error


def _forget(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


def LoginMiddlewareStack(inner: Any) -> Any:  # named like Channels' stacks
    return CookieMiddleware(LoginMiddleware(inner))
