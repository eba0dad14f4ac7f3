"""`/api/sessions/<id>/permission-prompts`: the prompts a turn waits on ("may this tool
run?"), running or parked on the customer, listed and answered over REST as on the chat
page.

The answer goes through the page's service (`turns.slots.slot_answer`), which holds the
rule (what each answer means, one answer wins); this edge only checks the body's shape and
that the id names a permission prompt of the caller's session.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
from gloveapp.api.common.fields import ErrorSerializer, OkSerializer, StrictCharField
from gloveapp.core.approvals.decisions import MAX_REASON, DecisionRefused
from gloveapp.core.approvals.permissions import PERMISSION_DECISIONS
from gloveapp.turns import selectors
from gloveapp.turns.permissions import PERMISSION_ANSWER_WORDS
from gloveapp.turns.slots import slot_answer


class _SlotTimeField(serializers.DateTimeField):
    # A SlotView keeps its time as an ISO string; sent in the API's one datetime format.
    def to_representation(self, value: Any) -> Any:
        return super().to_representation(datetime.fromisoformat(value))


class PermissionPromptOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The prompt's id: answer it at …/permission-prompts/<id>.")
    toolName = serializers.CharField(source="tool_name")
    toolInput = serializers.JSONField(
        source="input.toolInput",
        allow_null=True,
        help_text="The arguments the tool would run with.",
    )
    callId = serializers.CharField(source="call_id", allow_null=True)
    createdAt = _SlotTimeField(source="created_at")


class PermissionPromptListApi(ApiView):
    @extend_schema(
        operation_id="session_permission_prompts_list",
        description="The permission prompts the session's turn waits on (running, or parked "
        "until the customer answers), oldest first (its subagents' too); `[]` when none "
        "waits.",
        responses={200: PermissionPromptOutputSerializer(many=True), 404: ErrorSerializer},
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        prompts = selectors.permission_prompts(session.pk)
        return Response(PermissionPromptOutputSerializer(prompts, many=True).data)


class PermissionPromptAnswerApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PermissionPromptAnswerInput"  # nested serializers share the name "Input"

        decision = serializers.ChoiceField(
            PERMISSION_DECISIONS,
            required=False,
            help_text="approve: this call runs (as `once`); reject: it does not (as "
            "`deny_once`), and the agent reads `reason`. Nothing is remembered.",
        )
        reason = StrictCharField(
            required=False,
            allow_null=True,
            trim_whitespace=False,
            max_length=MAX_REASON,
            help_text="With reject: why, for the agent.",
        )
        value = serializers.ChoiceField(
            PERMISSION_ANSWER_WORDS,
            required=False,
            help_text="The chat page's answers: once, always (remembered), deny_once, "
            "always_deny (remembered); Glove's deny (remembered) and allow.",
        )

        def validate(self, attrs: dict) -> dict:
            if ("decision" in attrs) == ("value" in attrs):
                raise ValidationError({"decision": ["Send a decision or a value (one of them)."]})
            if "value" in attrs and attrs.get("reason") is not None:
                raise ValidationError({"reason": ["A reason goes with a decision."]})
            return attrs

    @extend_schema(
        operation_id="session_permission_prompt_answer",
        description=(
            'Answer a permission prompt as the chat page does: `{"decision": "approve"}`, '
            '`{"decision": "reject", "reason": "…"}` or `{"value": "always"}`. The turn '
            "goes on at once, on whichever worker takes it if it was parked."
        ),
        request=InputSerializer,
        responses={
            200: OkSerializer,
            400: ErrorSerializer,
            404: OpenApiResponse(
                ErrorSerializer,
                description="No such permission prompt in your session (or not your session).",
            ),
            409: OpenApiResponse(
                ErrorSerializer,
                description="The prompt was already answered, or its turn ended without it.",
            ),
        },
    )
    def post(self, request: Request, session_id: str, prompt_id: str) -> Response:
        session = owned_session(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        # Only permission prompts: a tool's own prompt (a confirmation) takes other answers.
        if not selectors.is_permission_prompt(session.pk, prompt_id):
            raise NotFound("Permission prompt not found.")
        answer = (
            data["value"]
            if "value" in data
            else {
                "decision": data["decision"],
                "reason": data.get("reason"),
            }
        )
        with refused_input_as_400():
            try:
                answered = slot_answer(
                    session_id=session.pk,
                    public_id=prompt_id,
                    value=answer,
                    by=request.user.get_username(),
                    via="rest",
                )
            except DecisionRefused as refused:
                raise ValidationError({refused.field: [str(refused)]}) from None
        if not answered:
            raise Conflict(
                "This permission prompt is no longer waiting for an answer.",
                code="not_waiting",
            )
        return Response({"ok": True})
