"""ASGI entry point: HTTP through Django, websockets through Channels, MCP and A2A through
their SDKs."""

from __future__ import annotations

import os
import sys
from importlib import import_module

from django.core.asgi import get_asgi_application

from gloveapp.conf import http_process_defaults

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
os.environ.setdefault("GLOVE_SERVER", "asgi")
# Under ASGI a request's sync code may run on a thread of its own, so connections are reused
# through psycopg's pool (PostgreSQL; settings.DB_POOL_SIZE).
os.environ.setdefault("DB_POOL_SIZE", "10")
# A request's statements are bounded (GLOVE_DB_STATEMENT_TIMEOUT_SECONDS) unless DEBUG.
http_process_defaults()
django_asgi_app = get_asgi_application()


def standard_reason_phrases() -> None:
    """Daphne (Twisted) writes the reason phrase from Twisted's own table, which lacks 422,
    429 and others ("429 Unknown Status"): fill it from the standard library's."""
    from http import HTTPStatus

    # Daphne imports Twisted's HTTP before the application; uvicorn and granian never do,
    # and importing it here would cost them Twisted.
    twisted_http = sys.modules.get("twisted.web.http")
    if twisted_http is None:
        return
    for status in HTTPStatus:
        twisted_http.RESPONSES.setdefault(status.value, status.phrase.encode("ascii"))


standard_reason_phrases()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from gloveapp.checks import leaky_connection_settings  # noqa: E402

# uvicorn and Daphne run no system checks: refuse to serve with settings that would exhaust
# the database's connections within seconds (glove.E006).
if leaky := leaky_connection_settings():
    raise ImproperlyConfigured(
        f"DB_CONN_MAX_AGE > 0 leaks one connection per request under ASGI ({', '.join(leaky)}); "
        "use DB_CONN_MAX_AGE=0 here (PostgreSQL uses psycopg's pool) and persistent "
        "connections only under gloveapp.wsgi."
    )

from channels.routing import ProtocolTypeRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from gloveapp.api.a2a.paths import a2a_path  # noqa: E402
from gloveapp.api.agents.events import events_asgi_app, events_path_session  # noqa: E402
from gloveapp.live.auth import LoginMiddlewareStack  # noqa: E402
from gloveapp.routing import RefusingURLRouter, websocket_urlpatterns  # noqa: E402


def imported_when_called(module: str, name: str):
    """The ASGI app `module.name`, imported on its first call. The MCP and A2A servers and
    their SDKs were half a second of every server's start; a server now pays it when it
    first serves one of them (uvicorn's lifespan starts MCP's at once, as before)."""
    app = None

    async def call(scope, receive, send):
        nonlocal app
        if app is None:
            app = getattr(import_module(module), name)
        await app(scope, receive, send)

    return call


mcp_endpoint = imported_when_called("gloveapp.api.mcp.server", "mcp_endpoint")
a2a_endpoint = imported_when_called("gloveapp.api.a2a.server", "a2a_endpoint")


async def http_app(scope, receive, send):
    """`/mcp/<workspace_id>` goes to the workspace MCP server, a session's event stream
    (`/api/sessions/<id>/events`, SSE) to its ASGI app (no Django request, so no thread
    parked per open stream); the A2A endpoints (`/a2a/<agent>/…` and the well-known card) to
    the A2A server; everything else to Django."""
    if scope["path"].startswith("/mcp/"):
        await mcp_endpoint(scope, receive, send)
    elif a2a_path(scope["path"]):
        await a2a_endpoint(scope, receive, send)
    elif scope["path"].endswith("/events") and events_path_session(scope["path"]):
        await events_asgi_app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            LoginMiddlewareStack(RefusingURLRouter(websocket_urlpatterns))
        ),
        # Servers with an ASGI lifespan (uvicorn) start the MCP session manager up front;
        # Daphne has none, and the endpoint starts it on the first MCP request instead.
        "lifespan": mcp_endpoint,
    }
)
