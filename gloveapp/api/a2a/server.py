"""The A2A endpoints of every agent a client may open, served beside Django (gloveapp/asgi.py).

    GET  /.well-known/agent-card.json              the default agent's card
    GET  /a2a/<agent>/.well-known/agent-card.json  an agent's card
    POST /a2a/<agent>/jsonrpc                      JSON-RPC 2.0 (SendMessage, GetTask, …)
         /a2a/<agent>/rest/…                       HTTP+JSON (/message:send, /tasks/{id}, …)

A card is public, as A2A discovery wants, for an agent open to customers; an agent for staff
shows its card to a staff token only. Every other request carries the API token (`Token <key>`
or `Bearer <key>`), checked here before the SDK sees the request: a missing or wrong one is a
401 naming the schemes. An agent that does not exist and one the caller may not open answer
the same 404. The SDK (`a2a-sdk`) parses and answers both bindings; `handler.py` does the
work. A body is held to the project's JSON rules first (`gloveapp.api.common.json_body`, as
the MCP server's), and to text every database stores: protobuf, the SDK's form of a request,
cannot hold a lone surrogate; JSON-RPC's refusal is its parse error (-32700).
"""

from __future__ import annotations

import json
import re
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import (
    ServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from rest_framework.exceptions import AuthenticationFailed
from starlette.applications import Starlette

from gloveapp.agents.config import agent_may_start, agent_names, default_agent_name, get_agent_spec
from gloveapp.api.a2a.card import agent_card
from gloveapp.api.a2a.handler import CALLER, TOKEN, GloveRequestHandler
from gloveapp.api.a2a.paths import CARD_PATH
from gloveapp.api.common.json_body import (
    BodyRefused,
    Disconnected,
    check_body,
    max_body_bytes,
    read_body,
    replaying,
)
from gloveapp.api.common.token_auth import CachedTokenAuthentication
from gloveapp.lib.db.outages import is_database_outage
from gloveapp.lib.http.middleware import beside_django
from gloveapp.live.sse import run_db

PATH = re.compile(r"^/a2a/(?P<agent>[A-Za-z0-9_-]{1,100})(?P<rest>/.*)?$")
CARD_VERSION = "1.0.0"
UNAUTHORIZED_HEADERS = [
    (b"www-authenticate", b'Bearer realm="glove-a2a"'),
    (b"www-authenticate", b'Token realm="glove-a2a"'),
]


class _Caller(User):
    def __init__(self, user: Any) -> None:
        self._user = user

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._user.get_username()


class _ContextBuilder(ServerCallContextBuilder):
    """The Django user the token named, for the handler (`CALLER`), and the headers the SDK
    reads the protocol's version from."""

    def build(self, request: Any) -> ServerCallContext:
        user = request.scope[CALLER]
        state = {CALLER: user, TOKEN: request.scope[TOKEN], "headers": dict(request.headers)}
        return ServerCallContext(user=_Caller(user), state=state)


_apps: dict[str, Starlette] = {}


def _agent_app(agent: str) -> Starlette:
    """The SDK's two bindings for `agent`, kept for the process (they hold no state)."""
    app = _apps.get(agent)
    if app is None:
        handler = GloveRequestHandler(agent)
        builder = _ContextBuilder()
        routes = [
            *create_jsonrpc_routes(handler, rpc_url="/jsonrpc", context_builder=builder),
            *create_rest_routes(handler, context_builder=builder, path_prefix="/rest"),
        ]
        app = _apps[agent] = Starlette(routes=routes)
    return app


async def _json(send: Any, status: int, body: Any, headers: list | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def _headers(scope: dict) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }


def _origin(scope: dict, headers: dict[str, str]) -> str:
    host = headers.get("host") or "localhost"
    scheme = scope.get("scheme") or "http"
    forwarded = headers.get("x-forwarded-proto")
    if forwarded in ("http", "https"):
        scheme = forwarded
    return f"{scheme}://{host}"


class _Refused(Exception):
    def __init__(self, status: int, body: dict, headers: list | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or []


async def _caller(headers: dict[str, str]) -> tuple[Any, Any]:
    """The user the request's token names, and the token; (None, None) without one;
    `_Refused` for a bad one."""
    raw = headers.get("authorization", "").strip()
    if not raw:
        return None, None
    keyword, _, key = raw.partition(" ")
    if keyword.lower() not in ("token", "bearer") or not key.strip():
        raise _Refused(401, {"error": "Invalid token header."}, UNAUTHORIZED_HEADERS)
    try:
        user, token = await run_db(
            CachedTokenAuthentication().authenticate_credentials, key.strip()
        )
    except AuthenticationFailed as refused:
        raise _Refused(401, {"error": str(refused.detail)}, UNAUTHORIZED_HEADERS) from None
    except Exception as error:
        if is_database_outage(error):
            raise _Refused(503, {"error": "The database is unavailable; try again."}) from None
        raise
    return user, token


NOT_FOUND = {"error": "No agent here."}


def _parse_error(message: str) -> dict:
    # As the SDK answers a body it cannot parse: a JSON-RPC error, HTTP 200.
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}}


async def _a2a_app(scope: dict, receive: Any, send: Any) -> None:
    headers = _headers(scope)
    path = scope["path"]
    if path == CARD_PATH:
        agent, rest = default_agent_name(), CARD_PATH
    else:
        match = PATH.match(path)
        if match is None:
            await _json(send, 404, NOT_FOUND)
            return
        agent, rest = match["agent"], match["rest"] or "/"
    try:
        user, token = await _caller(headers)
        # Who may open the agent is the chat's rule: unknown, staff-only for a customer, or
        # mesh-only: the same 404.
        if agent not in agent_names():
            raise _Refused(404, NOT_FOUND)
        if rest == CARD_PATH:
            if scope["method"] not in ("GET", "HEAD"):
                raise _Refused(405, {"error": "GET the card."}, [(b"allow", b"GET")])
            public = agent_may_start(agent, _Anyone())
            if not (public or (user is not None and agent_may_start(agent, user))):
                raise _Refused(404, NOT_FOUND)
            spec = await run_db(get_agent_spec, agent)
            card = agent_card(spec, origin=_origin(scope, headers), version=CARD_VERSION)
            await _json(send, 200, agent_card_to_dict(card))
            return
        if user is None:
            raise _Refused(
                401,
                {"error": "Authentication credentials were not provided."},
                UNAUTHORIZED_HEADERS,
            )
        if not agent_may_start(agent, user):
            raise _Refused(404, NOT_FOUND)
    except _Refused as refused:
        await _json(send, refused.status, refused.body, refused.headers)
        return
    if scope["method"] in ("POST", "PUT", "PATCH"):
        try:
            body = await read_body(receive, max_body_bytes())
            if body or rest.startswith("/jsonrpc"):
                check_body(body, storable_strings=True)
        except BodyRefused as refused:
            if rest.startswith("/jsonrpc"):
                await _json(send, 200, _parse_error(str(refused)))
            else:
                await _json(send, 400, {"error": f"The body is refused: {refused}"})
            return
        except Disconnected:
            return
        receive = replaying(body, receive)
    inner = dict(scope)
    inner["path"] = rest
    inner["raw_path"] = rest.encode()
    inner["root_path"] = scope.get("root_path", "") + f"/a2a/{agent}"
    inner[CALLER] = user
    inner[TOKEN] = token
    await _agent_app(agent)(inner, receive, send)


class _Anyone:
    """A caller who signed in with any token: may everyone of them open the agent?"""

    is_authenticated = True
    is_staff = False


# Django's host check and security headers, as the event stream's.
a2a_endpoint = beside_django(_a2a_app)
