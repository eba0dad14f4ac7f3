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

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import AuthenticationFailed

from gloveapp.api.access import ApiView
from gloveapp.api.errors import DATABASE_AWAY_RETRY_AFTER
from gloveapp.api.fields import ErrorSerializer
from gloveapp.api.token_auth import CachedTokenAuthentication
from gloveapp.conversations.access import session_watch_verdict
from gloveapp.db import is_database_outage
from gloveapp.live.sse import sse_response
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
    "text_delta": "(no id) Streamed text of the reply: `{text}`.",
    "tool_use": "(no id) The model called a tool: `{id, name, input}`.",
    "tool_use_result": "(no id) A tool's result: `{tool_name, call_id, result}`.",
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
            503: OpenApiResponse(
                ErrorSerializer, description="The database is away: retry after `Retry-After`."
            ),
        },
    )
    def get(self, request: Any, session_id: str) -> Any:  # pragma: no cover - schema only
        raise NotImplementedError


def _error(status: int, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": message, "field": field}, status=status)


async def _caller(request: HttpRequest) -> Any:
    """The user a token (`Authorization: Token <key>`) or the session cookie names, or None.
    A GET changes nothing, so the cookie needs no CSRF token here."""
    header = request.META.get("HTTP_AUTHORIZATION")
    if header:
        keyword, _, key = header.strip().partition(" ")
        if keyword.lower() != "token" or not key.strip():
            raise AuthenticationFailed("Invalid token header.")
        user, _ = await sync_to_async(CachedTokenAuthentication().authenticate_credentials)(
            key.strip()
        )
        return user
    user = await request.auser()
    return user if user.is_authenticated else None


def _cursor(request: HttpRequest) -> int | None:
    raw = request.META.get("HTTP_LAST_EVENT_ID")
    if raw is None:
        raw = request.GET.get("last_event_id")
    if raw is None or raw == "":
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        raise ValueError("must be a non-negative event id")
    return int(raw)


async def session_events(request: HttpRequest, session_id: str) -> HttpResponse:
    if request.method != "GET":
        response = _error(405, f'Method "{request.method}" not allowed.')
        response["Allow"] = "GET"
        return response
    try:
        user = await _caller(request)
    except AuthenticationFailed as refused:
        return _error(401, str(refused.detail))
    if user is None:
        return _error(401, "Authentication credentials were not provided.")
    try:
        last_event_id = _cursor(request)
    except ValueError as refused:
        return _error(400, f"{LAST_EVENT_ID_HEADER}: {refused}", LAST_EVENT_ID_HEADER)
    try:
        verdict, stream_id = await sync_to_async(session_watch_verdict)(
            user=user, session_id=session_id
        )
        if verdict != "allowed" or stream_id is None:
            return _error(404, "Session not found.")
        return await sse_response(
            stream=session_stream(stream_id),
            user_pk=user.pk,
            last_event_id=last_event_id,
            final_events=FINAL_EVENTS,
        )
    except Exception as error:
        if not is_database_outage(error) and not isinstance(error, TimeoutError):
            raise
        response = _error(503, "The database is unavailable for a moment; try again.")
        response["Retry-After"] = str(DATABASE_AWAY_RETRY_AFTER)
        return response


# drf-spectacular documents DRF views only: it reads the route's schema from this class.
session_events.cls = SessionEventsSchema  # type: ignore[attr-defined]
session_events.initkwargs = {}  # type: ignore[attr-defined]
