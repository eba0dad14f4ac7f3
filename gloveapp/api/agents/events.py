"""`GET /api/sessions/<id>/events`: a session's event log as Server-Sent Events.

The chat websocket's frames over plain HTTP, for clients that cannot or would rather not
open a websocket (a mobile app, a bot, another backend, `EventSource`). An async view: the
open stream waits on the event loop (`gloveapp.live.sse`), never on a worker thread.

Who may watch is the websocket's rule (`session_watch_verdict`): the owner (token, or the
session cookie) and staff; anyone else, and an id that names nothing, gets the same 404.
Resumable: the `Last-Event-ID` header (what `EventSource` sends when it reconnects) or
`?last_event_id=` replays what was missed, or answers a `resync` frame when too far behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import AuthenticationFailed

from gloveapp.api.common.access import ApiView
from gloveapp.api.common.errors import DATABASE_AWAY_RETRY_AFTER
from gloveapp.api.common.fields import ErrorSerializer
from gloveapp.api.common.token_auth import CachedTokenAuthentication
from gloveapp.conversations.access import may_see_tool_data, session_watch_verdict
from gloveapp.conversations.tool_frames import shown_tool_frame
from gloveapp.lib.db.outages import is_database_outage
from gloveapp.lib.http.middleware import beside_django
from gloveapp.live import open_streams
from gloveapp.live.auth import LOGIN_UNAVAILABLE, LoginMiddlewareStack
from gloveapp.live.sse import StreamFeed, open_feed, run_db, send_sse, sse_response
from gloveapp.live.streams import session_stream

LAST_EVENT_ID_HEADER = "Last-Event-ID"
# The stored events after which the stream is gone for good (as the websocket's).
FINAL_EVENTS = frozenset({"session.deleted"})

# Every event a session's stream carries: stored ones have an id (resumable), transient ones
# (streamed while a turn runs) have none. The OpenAPI schema describes them.
STORED_EVENTS: dict[str, str] = {
    "turn.queued": "A message was queued as a turn: `{turn}`.",
    "turn.started": "A worker started the turn: `{turn}`.",
    "turn.restarted": "The turn is retried on another worker after its worker stopped.",
    "turn.withdrawn": "A queued message was taken back before it ran: `{turn}`.",
    "turn.notice": "Something the turn says besides its reply: `{turn, notice}`.",
    "turn.finished": "The turn ended with its reply: `{turn, text}`.",
    "turn.error": "The turn failed or was stopped: `{turn, message}`.",
    "message.appended": "A message was stored (the user's, the agent's, tool results): "
    "`{message, seq}` in Glove's JSON.",
    "slot.pushed": "The turn pushed a slot (a card, a prompt): `{slot_id}`; read it at …/slots.",
    "slot.resolved": "A slot was answered, dismissed or expired: `{slot_id}` (or `{turn, "
    "expired}`).",
    "approval.decided": "Staff decided an approval the turn waits on: `{id, decision}`.",
    "approval.withdrawn": "An approval the turn waited on was withdrawn: `{id}`.",
    "permissions.changed": "A remembered permission changed.",
    "inbox.changed": "An inbox item was posted, resolved or consumed: `{item, resolved_by}`.",
    "tasks.replaced": "The session's task list: `{tasks}`.",
    "session.updated": "The session's title or counters changed.",
    "session.deleted": "The session was deleted; the stream ends.",
    "resync": "(no id) Too far behind to catch up event by event (`{reason, "
    "last_event_id}`): reload the state, then stream from `last_event_id`.",
}
TRANSIENT_EVENTS: dict[str, str] = {
    "text_delta": "(no id) Streamed text of the reply: `{text, turnId}`.",
    "tool_use": "(no id) The model called a tool: `{id, name, label, summary}` (the tool's "
    "label and the call's summary, as the chat page shows them); staff also get `input`, "
    "the raw arguments.",
    "tool_use_result": "(no id) A tool's result: `{id, name, tool_name, call_id, "
    "duration_ms, label, summary, status, statusText, message, result}`: `statusText` and "
    "`message` as the page's card says them; for the session's owner `result` is `{status, "
    "message, renderData, truncated}` (what a tool's own card shows), for staff the whole "
    "result as the tool returned it, `data` included.",
}


class LiveFrameSerializer(serializers.Serializer):
    """One SSE message's `data` (the websocket's frame). `id` is also the SSE `id:` line
    (null for transient events), `type` its `event:` line."""

    id = serializers.IntegerField(allow_null=True)
    type = serializers.ChoiceField([*STORED_EVENTS, *TRANSIENT_EVENTS])
    payload = serializers.DictField()

    class Meta:
        ref_name = "LiveFrame"


def _events_table() -> str:
    rows = [
        f"| `{name}` | {text} |" for name, text in {**STORED_EVENTS, **TRANSIENT_EVENTS}.items()
    ]
    return "\n".join(["| event | what it says |", "| --- | --- |", *rows])


class SessionEventsSchema(ApiView):
    """Describes the async view below in the OpenAPI schema (it is never dispatched)."""

    @extend_schema(
        operation_id="session_events_stream",
        description=(
            "The session's live events as Server-Sent Events (`text/event-stream`): each "
            "message is `id: <event id>` (stored events only), `event: <type>` and `data: "
            "<LiveFrame JSON>`; a `: heartbeat` comment every GLOVE_SSE_HEARTBEAT_SECONDS. "
            "Reconnect with `Last-Event-ID` (or `?last_event_id=`) to get every stored event "
            "you missed, once and in order, or a `resync` frame. Without a cursor the stream "
            "starts now. Owner or staff; anyone else gets the 404 of a session that does "
            "not exist.\n\n" + _events_table()
        ),
        parameters=[
            OpenApiParameter(
                LAST_EVENT_ID_HEADER,
                OpenApiTypes.INT,
                location=OpenApiParameter.HEADER,
                required=False,
                description="The last event id you received: the stream replays what follows.",
            ),
            OpenApiParameter(
                "last_event_id",
                OpenApiTypes.INT,
                required=False,
                description="The same as the header, for clients that cannot set headers.",
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                LiveFrameSerializer,
                description="The stream; each message's data is a LiveFrame.",
                examples=[
                    OpenApiExample(
                        "a stored event",
                        value={"id": 42, "type": "turn.finished", "payload": {"turn": 7}},
                    )
                ],
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            404: ErrorSerializer,
            421: OpenApiResponse(
                ErrorSerializer,
                description="Asked of a WSGI server: the ASGI server serves the stream.",
            ),
            429: OpenApiResponse(
                ErrorSerializer,
                description="The user holds GLOVE_MAX_OPEN_STREAMS_PER_USER open streams: "
                "retry after `Retry-After`.",
            ),
            503: OpenApiResponse(
                ErrorSerializer, description="The database is away: retry after `Retry-After`."
            ),
        },
    )
    def get(self, request: Any, session_id: str) -> Any:  # pragma: no cover - schema only
        raise NotImplementedError


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str
    field: str | None = None

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "field": self.field}

    def headers(self) -> dict[str, str]:
        if self.status == 405:
            return {"Allow": "GET"}
        if self.status == 503:
            return {"Retry-After": str(DATABASE_AWAY_RETRY_AFTER)}
        if self.status == 429:
            return {"Retry-After": str(open_streams.RETRY_AFTER_SECONDS)}
        return {}


WSGI_REFUSAL = Refusal(
    421,
    "The event stream is served by the ASGI server (in production the websocket server, "
    "where the proxy sends /api/sessions/<id>/events), not by this WSGI server.",
)


class DatabaseAway(Exception):
    pass


UNAVAILABLE = Refusal(503, "The database is unavailable for a moment; try again.")


async def open_session_feed(
    *,
    method: str,
    session_id: str,
    authorization: str | None,
    session_user: Callable[[], Awaitable[Any]],
    raw_cursor: str | None,
    run: Callable[..., Awaitable[Any]] = run_db,
    can_stream: bool = True,
) -> tuple[StreamFeed, int | None] | Refusal:
    """Who asks, for which stream, from where: the open feed and its cursor, or why not.

    The caller is a token (`Authorization: Token <key>`) or else the login cookie's user
    (`session_user()`); a GET changes nothing, so the cookie needs no CSRF token here."""
    if method != "GET":
        return Refusal(405, f'Method "{method}" not allowed.')
    try:
        if authorization:
            keyword, _, key = authorization.strip().partition(" ")
            if keyword.lower() != "token" or not key.strip():
                return Refusal(401, "Invalid token header.")
            authenticate = CachedTokenAuthentication().authenticate_credentials
            user, _ = await run(authenticate, key.strip())
        else:
            user = await session_user()
    except AuthenticationFailed as refused:
        return Refusal(401, str(refused.detail))
    except DatabaseAway:
        return UNAVAILABLE
    except Exception as error:
        if is_database_outage(error):
            return UNAVAILABLE
        raise
    if user is None or not user.is_authenticated:
        return Refusal(401, "Authentication credentials were not provided.")
    raw = (raw_cursor or "").strip()
    if raw and not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        return Refusal(
            400,
            f"{LAST_EVENT_ID_HEADER}: must be a non-negative event id",
            LAST_EVENT_ID_HEADER,
        )
    cursor = int(raw) if raw else None
    try:
        # On the shared pool: a request's own thread would stay parked while it streams.
        verdict, stream_id = await run(session_watch_verdict, user=user, session_id=session_id)
        if verdict != "allowed" or stream_id is None:
            return Refusal(404, "Session not found.")
        if not can_stream:
            return WSGI_REFUSAL
        staff = may_see_tool_data(user)
        feed = await open_feed(
            stream=session_stream(stream_id),
            user_pk=user.pk,
            final_events=FINAL_EVENTS,
            shape=lambda event_type, payload: shown_tool_frame(event_type, payload, staff=staff),
        )
    except open_streams.TooManyStreams as why:
        return Refusal(429, str(why))
    except Exception as error:
        if is_database_outage(error) or isinstance(error, TimeoutError):
            return UNAVAILABLE
        raise
    return feed, cursor


async def _in_request_thread(func: Any, *args: Any, **kwargs: Any) -> Any:
    return await sync_to_async(func)(*args, **kwargs)


def _session_user(request: HttpRequest) -> Any:
    # AuthenticationMiddleware's lazy user, evaluated here, in the request's thread: left
    # lazy, its first use (`is_authenticated`) would read the session in the event loop
    # (SynchronousOnlyOperation, a 500 with a session cookie under WSGI).
    user = request.user
    _ = user.is_authenticated
    return user


async def session_events(request: HttpRequest, session_id: str) -> HttpResponse:
    """The Django view (a project that mounts the API itself; the ASGI app below serves
    this project's `/api/`)."""
    opened = await open_session_feed(
        method=request.method or "",
        session_id=session_id,
        authorization=request.META.get("HTTP_AUTHORIZATION"),
        session_user=lambda: _in_request_thread(_session_user, request),
        raw_cursor=request.META.get("HTTP_LAST_EVENT_ID", request.GET.get("last_event_id")),
        # Django's handler keeps this request's thread anyway: its reads go there, on the
        # request's own connection.
        run=_in_request_thread,
        # Under WSGI an open stream would hold one of the server's few threads for as long
        # as it is open: the ASGI server serves it (the production proxy routes it there).
        can_stream=isinstance(request, ASGIRequest),
    )
    if isinstance(opened, Refusal):
        response = JsonResponse(opened.body(), status=opened.status)
        for name, value in opened.headers().items():
            response[name] = value
        return response
    feed, cursor = opened
    return sse_response(feed, cursor)


_EVENTS_PATH = re.compile(r"/api/sessions/([^/]+)/events")


def events_path_session(path: str) -> str | None:
    """The session id of a `/api/sessions/<id>/events` path, else None."""
    match = _EVENTS_PATH.fullmatch(path)
    return match[1] if match else None


async def _events_app(scope: dict, receive: Any, send: Any) -> None:
    headers = {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    raw_cursor = headers.get("last-event-id", (query.get("last_event_id") or [None])[0])

    async def login_user() -> Any:
        if scope.get(LOGIN_UNAVAILABLE):  # the login cookie could not be read: not now
            raise DatabaseAway("the login could not be read")
        return scope.get("user")

    opened = await open_session_feed(
        method=scope["method"],
        session_id=events_path_session(scope["path"]) or "",
        authorization=headers.get("authorization"),
        session_user=login_user,
        raw_cursor=raw_cursor,
    )
    if isinstance(opened, Refusal):
        body = json.dumps(opened.body()).encode()
        extra = [
            (name.lower().encode(), value.encode()) for name, value in opened.headers().items()
        ]
        await send(
            {
                "type": "http.response.start",
                "status": opened.status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return
    feed, cursor = opened
    await send_sse(feed, cursor, receive, send)


# The stream as this project's ASGI application serves it (gloveapp/asgi.py): Django's host
# check and security headers (`beside_django`), the login cookie read as the websockets read
# it, then the feed straight onto the connection.
events_asgi_app = beside_django(LoginMiddlewareStack(_events_app))


# drf-spectacular documents DRF views only: it reads the route's schema from this class.
session_events.cls = SessionEventsSchema  # type: ignore[attr-defined]
session_events.initkwargs = {}  # type: ignore[attr-defined]
