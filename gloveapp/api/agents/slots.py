"""The slots of a session's turn from any client: what it shows and asks, and the answers.

    GET  /api/sessions/<id>/slots                  what the turn shows and asks, as data
    POST /api/sessions/<id>/slots/<slot id>        {"value": …} or {"dismiss": true}

Every answer goes through the page's service (`turns.slots.slot_answer`), so an answer
from any client continues the turn exactly as the page's does. Who may do what is the page's
rule: the owner answers; staff read along; anyone else gets the same 404 as for a session
that does not exist.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import (
    ApiView,
    Conflict,
    NotFound,
    owned_session,
    refused_input_as_400,
)
from gloveapp.api.common.fields import ClosedSchema, ErrorSerializer, OkSerializer
from gloveapp.api.common.slot_data import (
    SlotOutputSerializer,
    agent_tools,
    answer_schema,
    check_answer,
    slots_as_data,
)
from gloveapp.conversations.access import viewable_session
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.turns import selectors
from gloveapp.turns.slots import slot_answer


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
    class InputSerializer(ClosedSchema):
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
        slot = selectors.slot_to_answer(session.pk, slot_id)
        if slot is None:
            raise NotFound("Slot not found.")
        dismiss = data.get("dismiss") is True
        if not dismiss and slot.renderer != PERMISSION_RENDERER:
            # A tool's declared shape; a permission prompt's words are checked by its service.
            check_answer(data["value"], answer_schema(slot, agent_tools(session)))
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
