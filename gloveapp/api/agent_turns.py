"""The server's agents from any client: start a turn, read its state, answer its slots.

    POST /api/sessions/<id>/agent/turns            {"text": …}  -> 202 {turnId, state, …}
    GET  /api/sessions/<id>/agent/turns/<turn id>  the turn's state
    GET  /api/sessions/<id>/slots                  what the turn shows and asks, as data
    POST /api/sessions/<id>/slots/<slot id>        {"value": …} or {"dismiss": true}

The stream is `GET /api/sessions/<id>/events` (`gloveapp.api.session_events`); permission
prompts and Stop keep their routes (`…/permission-prompts`, `…/cancel`). Every write goes
through the page's entry points (`turns.public.start_turn_sync`, `turns.services.slot_answer`),
so an answer from any client continues the turn exactly as the page's does.

Who may do what is the page's rule: the owner (token, or session cookie with CSRF) starts
and answers; staff read along (turn state, slots, the stream); anyone else gets the same 404
as for a session or turn that does not exist.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.agents.config import AgentNotStartable, get_agent_spec, startable_agent
from gloveapp.api.access import ApiView, Conflict, NotFound, owned_session, refused_input_as_400
from gloveapp.api.fields import ErrorSerializer, OkSerializer, Schema
from gloveapp.api.idempotency import (
    IDEMPOTENCY_KEY_PARAMETER,
    REPLAYED_HEADER,
    idempotency_errors,
    request_key,
)
from gloveapp.conversations import idempotency
from gloveapp.conversations.access import address_of, viewable_session
from gloveapp.conversations.models import Session
from gloveapp.core import input_rules
from gloveapp.core.approvals import APPROVAL_RENDERER
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.turns import public as turns
from gloveapp.turns import selectors
from gloveapp.turns.models import Turn
from gloveapp.turns.services import PERMISSION_ANSWER_WORDS, slot_answer

MAX_TEXT_CHARS = 20_000  # as the chat page's composer
# Seconds a client is asked to wait (Retry-After) when the session's queue is full (a turn
# ahead of it usually ends within this) and when the user's turns per minute are spent.
QUEUE_FULL_RETRY_AFTER = 5
TURN_LIMIT_RETRY_AFTER = 60

PERMISSION_ANSWER_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": list(PERMISSION_ANSWER_WORDS)},
        {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "reject"]},
                "reason": {"type": ["string", "null"]},
            },
            "required": ["decision"],
        },
    ]
}


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


def _turn_answer(turn: Turn, session_key: str, **extra: Any) -> dict[str, Any]:
    turn.sessionId = session_key  # type: ignore[attr-defined]
    for key, value in _turn_urls(session_key, turn.pk, extra.get("lastEventId")).items():
        setattr(turn, key, value)
    return dict(TurnOutputSerializer(turn).data) | extra


def _retry_after(exc: Exception, seconds: int) -> Throttled:
    # DRF's Throttled is a 429 whose `wait` becomes the Retry-After header.
    return Throttled(wait=seconds, detail=str(exc))


class AgentTurnStartApi(ApiView):
    class InputSerializer(Schema):
        class Meta:
            ref_name = "AgentTurnStartInput"

        text = serializers.CharField(
            max_length=MAX_TEXT_CHARS,
            trim_whitespace=True,
            help_text="The user's message; the agent answers it in a turn on a worker.",
        )

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
            "(GLOVE_MAX_QUEUED_MESSAGES) or the user's turns per minute are spent "
            "(GLOVE_TURNS_PER_USER_PER_MINUTE), as on the chat page."
        ),
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=InputSerializer,
        responses={
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
                description="Queue full or turn limit: retry after `Retry-After` seconds.",
            ),
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        try:
            startable_agent(session.agent_name, request.user)
        except AgentNotStartable as refused:
            raise ValidationError({refused.field: [str(refused)]}) from None
        text = data["text"]
        key = request_key(request)

        def perform() -> dict[str, Any]:
            turn = turns.start_turn_sync(
                session_id=session.pk, text=text, user_id=request.user.pk, source="api"
            )
            return {"turnId": turn.pk, "ahead": turn.ahead, "lastEventId": turn.queued_event - 1}

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
            raise _retry_after(exc, TURN_LIMIT_RETRY_AFTER) from None
        turn = Turn.objects.get(pk=started["turnId"])
        answer = _turn_answer(
            turn, session.key, ahead=started["ahead"], lastEventId=started["lastEventId"]
        )
        response = Response(answer, status=status.HTTP_202_ACCEPTED)
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


# -- slots ------------------------------------------------------------------------------------


class SlotOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Answer it at …/slots/<id>.")
    renderer = serializers.CharField(
        help_text="How it is shown: a tool's name (its own card), `permission_request`, "
        "`approval_request`, or a generic renderer."
    )
    input = serializers.JSONField(allow_null=True, help_text="What the slot shows.")
    toolName = serializers.CharField(source="tool_name", allow_null=True)
    callId = serializers.CharField(source="call_id", allow_null=True)
    displayStrategy = serializers.CharField(source="display_strategy")
    waitsForAnswer = serializers.BooleanField(
        source="waits_for_answer", help_text="False: a card that shows something and asks nothing."
    )
    answeredBy = serializers.ChoiceField(
        ["owner", "staff", "nobody"],
        help_text="owner: answer it here; staff: an approval, decided at /api/approvals/; "
        "nobody: it waits for no answer.",
    )
    answerSchema = serializers.JSONField(
        allow_null=True,
        help_text="JSON Schema of the `value` it expects (null: any JSON, or no answer).",
    )
    expired = serializers.BooleanField(help_text="Its turn ended before it was answered.")
    createdAt = serializers.CharField(source="created_at")


def _answer_schema(slot: selectors.SlotView, tools: dict[str, Any] | None) -> Any:
    if slot.renderer == PERMISSION_RENDERER:
        return PERMISSION_ANSWER_SCHEMA
    if not slot.waits_for_answer or slot.renderer == APPROVAL_RENDERER or not tools:
        return None
    tool = tools.get(slot.tool_name or "")
    return getattr(tool, "slot_answer_schema", None)


def _agent_tools(session: Session) -> dict[str, Any] | None:
    try:
        spec = get_agent_spec(session.agent_name)
    except Exception:  # a misconfigured agent: the slots still read, without answer shapes
        return None
    return {tool.name: tool for tool in spec.tools}


def slots_as_data(session: Session) -> list[dict[str, Any]]:
    slots = selectors.visible_slots(session.pk)
    tools = _agent_tools(session) if any(slot.waits_for_answer for slot in slots) else None
    rows = []
    for slot in slots:
        answered_by = "nobody"
        if slot.waits_for_answer:
            answered_by = "staff" if slot.renderer == APPROVAL_RENDERER else "owner"
        rows.append(
            {
                **slot.to_dict(),
                "answeredBy": answered_by,
                "answerSchema": _answer_schema(slot, tools),
            }
        )
    return [dict(SlotOutputSerializer(row).data) for row in rows]


class SlotListApi(ApiView):
    @extend_schema(
        operation_id="session_slots_list",
        description=(
            "What the session's turn shows and asks now, in push order, as the chat page "
            "shows it: cards (`waitsForAnswer: false`), prompts to answer here (`answeredBy: "
            "owner`, with the shape of the answer in `answerSchema`), approvals staff decide, "
            "and the prompts of a turn that stopped before they were answered (`expired`)."
        ),
        responses={200: SlotOutputSerializer(many=True), 404: ErrorSerializer},
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = viewable_session(request.user, session_id)
        return Response(slots_as_data(session))


class SlotAnswerApi(ApiView):
    class InputSerializer(Schema):
        class Meta:
            ref_name = "SlotAnswerInput"

        value = serializers.JSONField(
            required=False,
            help_text="The answer, shaped as the slot's `answerSchema` says.",
        )
        dismiss = serializers.BooleanField(
            required=False,
            help_text="true: close the prompt unanswered, as the chat page's Dismiss button "
            "and Glove's `reject(slotId)` do: the waiting tool fails and is run again (up "
            "to 3 more times), so it may ask again with a fresh slot; a permission prompt "
            "reads it as a no for this call only.",
        )

        def validate(self, attrs: dict) -> dict:
            dismissing = attrs.get("dismiss") is True
            if dismissing == ("value" in attrs):
                raise ValidationError({"value": ["Send a value, or dismiss: true (one of them)."]})
            return attrs

    @extend_schema(
        operation_id="session_slot_answer",
        description=(
            "Answer (or dismiss) a prompt the turn waits on, as the chat page does; the turn "
            "goes on at once. A dismissed prompt is Glove's `reject(slotId)`: the tool that "
            "waited on it fails and is run again (up to 3 more times), so it may push a "
            "fresh slot (watch for `slot.pushed`); after the last retry the model reads the "
            "tool's error. A dismissed permission prompt is a no for this call only (nothing "
            "remembered). Permission prompts take their words here too (or use "
            "…/permission-prompts/<id>); approvals are decided by staff at "
            "/api/approvals/<id>/decide."
        ),
        request=InputSerializer,
        responses={
            200: OkSerializer,
            400: ErrorSerializer,
            404: OpenApiResponse(ErrorSerializer, description="No such slot in your session."),
            409: OpenApiResponse(
                ErrorSerializer,
                description="Already answered, or its turn ended without it (or it waits "
                "for no answer, or for staff's decision).",
            ),
        },
    )
    def post(self, request: Request, session_id: str, slot_id: str) -> Response:
        session = owned_session(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        if not selectors.slot_exists(session.pk, slot_id):
            raise NotFound("Slot not found.")
        dismiss = data.get("dismiss") is True
        with refused_input_as_400():
            try:
                answered = slot_answer(
                    session_id=session.pk,
                    public_id=slot_id,
                    value=None if dismiss else data["value"],
                    dismiss=dismiss,
                    by=request.user.get_username(),
                    via="rest",
                )
            except ValueError as refused:
                field = getattr(refused, "field", None) or "value"
                raise ValidationError({field: [str(refused)]}) from None
        if not answered:
            raise Conflict("This slot is no longer waiting for an answer.", code="not_waiting")
        return Response({"ok": True})
