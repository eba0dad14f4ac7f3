"""The server's agents from any client: start a turn and read its state.

    POST /api/sessions/<id>/agent/turns            {"text": …}  -> 202 {turnId, state, …}
    POST /api/sessions/<id>/agent/turns?wait=30    the same, answered when the turn ends,
                                                   asks someone, or the wait runs out
    GET  /api/sessions/<id>/agent/turns            the session's turns, newest first, paged
    GET  /api/sessions/<id>/agent/turns/<turn id>  the turn's state

Its slots are `gloveapp.api.agents.slots`, the stream `GET /api/sessions/<id>/events`
(`gloveapp.api.agents.events`); permission prompts and Stop keep their routes
(`…/permission-prompts`, `…/cancel`). Every write goes through the page's entry points
(`turns.public.start_turn_sync`), so a turn started from any client runs exactly as the
page's does.

Who may do what is the page's rule: the owner (token, or session cookie with CSRF) starts
and answers; staff read along (turn state, slots, the stream); anyone else gets the same 404
as for a session or turn that does not exist.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.agents.config import AgentNotStartable, startable_agent
from gloveapp.api.common.access import (
    ApiView,
    NotFound,
    owned_session,
    refused_input_as_400,
)
from gloveapp.api.common.fields import ClosedSchema, CursorField, ErrorSerializer
from gloveapp.api.common.idempotency import (
    IDEMPOTENCY_KEY_PARAMETER,
    REPLAYED_HEADER,
    idempotency_errors,
    request_key,
)
from gloveapp.api.common.links import link_next
from gloveapp.api.common.token_webhooks import turn_webhook_url
from gloveapp.conversations import idempotency
from gloveapp.conversations.access import address_of, viewable_session
from gloveapp.core import input_rules
from gloveapp.lib.db.outages import answer_after_commit
from gloveapp.turns import public as turns
from gloveapp.turns import selectors
from gloveapp.turns.models import Turn

MAX_TEXT_CHARS = 20_000  # as the chat page's composer
# Seconds a client is asked to wait (Retry-After) when the session's queue is full (a turn
# ahead of it usually ends within this) and when the user's turns per minute are spent.
QUEUE_FULL_RETRY_AFTER = 5
TURN_LIMIT_RETRY_AFTER = 60
# A page of `GET …/agent/turns`: the default and the most turns one page holds; the name
# its cursors are signed for.
TURNS_PAGE_DEFAULT = 50
TURNS_PAGE_MAX = 200
TURNS_LISTED = "api.agent-turns"
# How often a waiting start reads its turn again: soon at first (most turns of a quick
# agent end within a second), then at most this often.
WAIT_FIRST_POLL = 0.05
WAIT_MAX_POLL = 0.5


class TurnOutputSerializer(serializers.Serializer):
    turnId = serializers.IntegerField(source="pk")
    sessionId = serializers.CharField(help_text="The session, by the id the caller names it.")
    state = serializers.ChoiceField(
        ["queued", "running", "waiting", "done", "failed", "cancelled"],
        source="status",
        help_text="queued: behind another turn or a free worker; running: on a worker; "
        "waiting: parked on a person (an approval, a permission prompt, a slot); done, "
        "failed, cancelled: ended.",
    )
    text = serializers.CharField(help_text="The user message that started the turn.")
    attempts = serializers.IntegerField(help_text="Above 1: retried after a worker stopped.")
    error = serializers.CharField(allow_blank=True, help_text="Why it failed or stopped.")
    notice = serializers.CharField(allow_blank=True)
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    reply = serializers.CharField(
        allow_null=True,
        help_text="What the agent answered, once the turn is done (null before, or when it "
        "said nothing).",
    )
    turnUrl = serializers.CharField(help_text="Where this state is read.")
    streamUrl = serializers.CharField(
        help_text="The session's event stream (SSE), from just before this turn was queued."
    )


class StartOutputSerializer(TurnOutputSerializer):
    ahead = serializers.IntegerField(help_text="Turns that ran or waited before this one.")
    lastEventId = serializers.IntegerField(
        help_text="The stream's cursor just before this turn: send it as Last-Event-ID."
    )


def _turn_urls(session_key: str, turn_id: int, last_event_id: int | None) -> dict[str, str]:
    stream = reverse("api-session-events", args=[session_key])
    if last_event_id is not None:
        stream += f"?last_event_id={last_event_id}"
    return {
        "turnUrl": reverse("api-session-agent-turn", args=[session_key, turn_id]),
        "streamUrl": stream,
    }


def _turn_answer(
    turn: Turn, session_key: str, *, reply: bool = True, **extra: Any
) -> dict[str, Any]:
    """The turn as the API says it; `reply=False` reads nothing (the reply is null)."""
    turn.sessionId = session_key  # type: ignore[attr-defined]
    turn.reply = selectors.turn_reply(turn) if reply else None  # type: ignore[attr-defined]
    for key, value in _turn_urls(session_key, turn.pk, extra.get("lastEventId")).items():
        setattr(turn, key, value)
    return dict(TurnOutputSerializer(turn).data) | extra


def _retry_after(exc: Exception, seconds: int) -> Throttled:
    # DRF's Throttled is a 429 whose `wait` becomes the Retry-After header; a budget's
    # refusal names the budget (`budget` in the body).
    throttled = Throttled(wait=seconds, detail=str(exc))
    throttled.budget = getattr(exc, "budget", None)
    return throttled


def wait_until_settled(turn_id: int, seconds: float) -> Turn:
    """The turn once it ended or waits on someone's answer, or as it is when `seconds` ran
    out. It holds the request's thread while it waits: `GLOVE_TURN_WAIT_MAX_SECONDS` bounds
    it."""
    deadline = time.monotonic() + seconds
    pause = WAIT_FIRST_POLL
    while True:
        turn = Turn.objects.get(pk=turn_id)
        left = deadline - time.monotonic()
        if selectors.turn_settled(turn) or left <= 0:
            return turn
        time.sleep(min(pause, left))
        pause = min(pause * 2, WAIT_MAX_POLL)


class AgentTurnStartApi(ApiView):
    class QuerySerializer(serializers.Serializer):
        class Meta:
            ref_name = "AgentTurnListQuery"

        limit = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=TURNS_PAGE_MAX,
            help_text=f"Turns per page, 1 to {TURNS_PAGE_MAX} (default {TURNS_PAGE_DEFAULT}).",
        )
        cursor = CursorField(
            listed=TURNS_LISTED,
            tie=int,
            help_text='Where the next page starts: the `cursor` of the `Link: <...>; rel="next"` '
            "header of the page before (opaque).",
        )

    class WaitSerializer(serializers.Serializer):
        class Meta:
            ref_name = "AgentTurnStartWait"

        wait = serializers.FloatField(
            required=False,
            min_value=0,
            help_text="Seconds to wait for the turn to end (or to ask someone) before "
            "answering; at most GLOVE_TURN_WAIT_MAX_SECONDS. 200 when it did, 202 when the "
            "wait ran out first.",
        )

        def validate_wait(self, value: float) -> float:
            most = settings.GLOVE_TURN_WAIT_MAX_SECONDS
            if value > most:
                raise ValidationError(f"At most {most} seconds.")
            return value

    @extend_schema(
        operation_id="session_agent_turns_list",
        description=(
            "The session's turns, newest first, each as its state reads. One page of `limit` "
            f"(default {TURNS_PAGE_DEFAULT}, at most {TURNS_PAGE_MAX}): when more follow, the "
            '`Link` header names the next page (`rel="next"`, with its `cursor`), a keyset '
            "page: the same cost for every page. Owner or staff; anyone else gets the 404 of "
            "a session that does not exist."
        ),
        parameters=[QuerySerializer],
        responses={
            200: TurnOutputSerializer(many=True),
            400: ErrorSerializer,
            404: ErrorSerializer,
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = viewable_session(request.user, session_id)
        query = self.validated(self.QuerySerializer, request.query_params)
        rows, next_cursor = selectors.turns_page(
            session.pk, limit=query.get("limit", TURNS_PAGE_DEFAULT), cursor=query.get("cursor")
        )
        address = address_of(request.user, session)
        response = Response([_turn_answer(turn, address) for turn in rows])
        return link_next(response, request, next_cursor, listed=TURNS_LISTED)

    class InputSerializer(ClosedSchema):
        class Meta:
            ref_name = "AgentTurnStartInput"

        text = serializers.CharField(
            max_length=MAX_TEXT_CHARS,
            trim_whitespace=True,
            help_text="The user's message; the agent answers it in a turn on a worker.",
        )

        webhook = serializers.URLField(
            required=False,
            max_length=2000,
            help_text="An http(s) URL told when the turn ends: a signed POST naming the turn "
            "and its outcome (`turn.ended`), retried with backoff until it answers 2xx.",
        )

        def validate_webhook(self, value: str) -> str:
            if not value.lower().startswith(("https://", "http://")):
                raise ValidationError("An http or https URL.")
            return value

        def validate_text(self, value: str) -> str:
            problem = input_rules.unstorable_text_problem(value)
            if problem:
                raise ValidationError(f"The message contains {problem}, which cannot be stored.")
            return value

    @extend_schema(
        operation_id="session_agent_turn_start",
        description=(
            "Post a user message to the session's agent: it is queued as a turn (one at a "
            "time per session) and a worker answers it. The answer names the turn, its state "
            "and where to stream it (`streamUrl`, from `lastEventId`). With "
            "`Idempotency-Key`, a retry starts no second turn and gets the first answer "
            "(state read now). 429 with `Retry-After` when the session's queue is full "
            "(GLOVE_MAX_QUEUED_MESSAGES) or a budget refuses the turn: the user's turns per "
            "minute (GLOVE_TURNS_PER_USER_PER_MINUTE, the budget `turns-per-minute`) or a "
            "refusing budget whose window is spent; `detail` names the budget and "
            "`Retry-After` is the seconds until its window opens again, as on the chat page."
        ),
        parameters=[IDEMPOTENCY_KEY_PARAMETER, WaitSerializer],
        request=InputSerializer,
        responses={
            200: OpenApiResponse(
                StartOutputSerializer,
                description="With `wait`: the turn ended, or it waits on someone's answer "
                "(read its slots), within the wait.",
            ),
            202: StartOutputSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="`text` missing, empty, too long or unstorable; or `agentName`: "
                "the session's agent is not one you may use.",
            ),
            404: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
            429: OpenApiResponse(
                ErrorSerializer,
                description="Queue full, or a budget refused the turn (named in `detail`): "
                "retry after `Retry-After` seconds.",
            ),
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        wait = self.validated(self.WaitSerializer, request.query_params).get("wait")
        data = self.validated(self.InputSerializer, request.data)
        try:
            startable_agent(session.agent_name, request.user)
        except AgentNotStartable as refused:
            raise ValidationError({refused.field: [str(refused)]}) from None
        text = data["text"]
        key = request_key(request)
        created: list[Turn] = []  # the turn this request queued (none when replayed)

        def perform() -> dict[str, Any]:
            queued = turns.start_turn_sync(
                session_id=session.pk,
                text=text,
                user_id=request.user.pk,
                source="api",
                webhook_url=turn_webhook_url(data.get("webhook"), request.auth),
            )
            created.append(queued.turn)
            return {
                "turnId": queued.turn.pk,
                "ahead": queued.ahead,
                "lastEventId": queued.queued_event - 1,
            }

        try:
            with refused_input_as_400(), idempotency_errors():
                if key is None:
                    with transaction.atomic():
                        started, replayed = perform(), False
                else:
                    started, replayed = idempotency.idempotent_write(
                        user_id=request.user.pk,
                        key=key,
                        scope=f"agent_turn_start:{session.pk}",
                        fingerprint=idempotency.request_fingerprint(text),
                        perform=perform,
                    )
        except turns.QueueFull as exc:
            raise _retry_after(exc, QUEUE_FULL_RETRY_AFTER) from None
        except turns.TurnLimitReached as exc:
            # The budget that refused says when its window opens again.
            raise _retry_after(exc, exc.retry_after or TURN_LIMIT_RETRY_AFTER) from None
        extra = {"ahead": started["ahead"], "lastEventId": started["lastEventId"]}

        def read_now() -> tuple[dict[str, Any], int]:
            if wait:
                turn = wait_until_settled(started["turnId"], wait)
                if selectors.turn_settled(turn):
                    return _turn_answer(turn, session.key, **extra), status.HTTP_200_OK
            else:
                turn = Turn.objects.get(pk=started["turnId"])
            return _turn_answer(turn, session.key, **extra), status.HTTP_202_ACCEPTED

        def as_queued() -> tuple[dict[str, Any], int]:
            answer = _turn_answer(created[0], session.key, reply=False, **extra)
            return answer, status.HTTP_202_ACCEPTED

        # This request queued the turn and it is committed: the answer says so even if the
        # database went away since (a 503 would make the client queue the message again).
        # A replay wrote nothing: its 503 is true, and sending it again is safe.
        answer, answered = (
            answer_after_commit(read_now, otherwise=as_queued) if created else read_now()
        )
        response = Response(answer, status=answered)
        if replayed:
            response[REPLAYED_HEADER] = "true"
        return response


class AgentTurnDetailApi(ApiView):
    @extend_schema(
        operation_id="session_agent_turn_retrieve",
        description="A turn's state. The owner and staff may read it; anyone else gets the "
        "404 of a turn that does not exist.",
        responses={200: TurnOutputSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, session_id: str, turn_id: str) -> Response:
        session = viewable_session(request.user, session_id)
        turn = None
        if turn_id.isascii() and turn_id.isdigit() and len(turn_id) <= 18:
            turn = Turn.objects.filter(pk=int(turn_id), session_id=session.pk).first()
        if turn is None:
            raise NotFound("Turn not found.")
        return Response(_turn_answer(turn, address_of(request.user, session)))
