"""The remote store's messages, counters, tasks and permissions routes.

Each view checks that the caller owns the session (which also turns the URL's id, the
owner's own, into the session's global id the services take), calls one service, and
renders the runtime's wire format (glove-core field names).
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.access import (
    ApiView,
    owned_session,
    owned_session_id,
    refused_input_as_400,
)
from gloveapp.api.fields import (
    ErrorSerializer,
    JsonValueField,
    MessageSerializer,
    OkSerializer,
    TaskSerializer,
    TaskUpdatesSerializer,
    task_updates_to_core,
    to_core_message,
    to_core_task,
)
from gloveapp.api.idempotency import (
    IDEMPOTENCY_KEY_PARAMETER,
    REPLAYED_HEADER,
    idempotency_errors,
    request_key,
)
from gloveapp.conversations import idempotency, selectors, services
from gloveapp.conversations.access import (
    owned_or_unborn_session_id,
    owned_session_id_creating,
    unused_key,
    usable_session_id,
)
from gloveapp.conversations.models import Session
from gloveapp.core import input_rules
from gloveapp.core.store import permission_key
from gloveapp.core.types import PERMISSION_STATUSES, TokenUsage

NOT_FOUND = {404: ErrorSerializer}


def _wire(objects: list) -> list[dict]:
    return [obj.to_dict() for obj in objects]


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in {"1", "true", "yes"}


class MessagesApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "MessagesAppendInput"  # nested serializers all share the name "Input"

        messages = MessageSerializer(many=True, allow_empty=True)

    @extend_schema(
        operation_id="session_messages_list",
        parameters=[
            OpenApiParameter(
                "since_compaction",
                OpenApiTypes.BOOL,
                description="Only what the model sees: from the last compaction summary on.",
            )
        ],
        responses={200: MessageSerializer(many=True), **NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        # One query: the ownership check is the history's join (404 for an outsider).
        wires = None
        if usable_session_id(session_id):
            wires = selectors.read_owned_messages(
                session_id,
                owner=request.user,
                since_compaction=_flag(request, "since_compaction"),
            )
        if wires is None and unused_key(request.user, session_id):
            wires = []  # a key its owner has not used yet: an empty history, nothing created
        if wires is None:
            raise Http404("Session not found.")
        return Response(wires)

    @extend_schema(
        operation_id="session_messages_append",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=InputSerializer,
        responses={
            200: OkSerializer,
            400: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
            **NOT_FOUND,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        key = request_key(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key_in_url = session_id
        replayed = False
        # Checked before a first write creates the session; the append refused after that
        # takes the new session back with it.
        with refused_input_as_400(), idempotency_errors(), transaction.atomic():
            session_id = owned_session_id_creating(request.user, session_id)
            messages = [to_core_message(m) for m in serializer.validated_data["messages"]]

            def append() -> dict:
                services.messages_append(session_id=session_id, messages=messages)
                return {"ok": True}

            if key is None:
                answer = append()
            else:
                answer, replayed = idempotency.idempotent_write(
                    user_id=request.user.pk,
                    key=key,
                    scope=f"session_messages_append:{key_in_url}",
                    fingerprint=idempotency.request_fingerprint(request.data),
                    perform=append,
                )
        response = Response(answer)
        if replayed:
            response[REPLAYED_HEADER] = "true"
        return response


class TokenConsumptionSerializer(serializers.Serializer):
    """Glove's `TokenConsumptionCounter`: the session's totals, never reset."""

    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()


def tokens_wire(session: Session) -> dict[str, Any]:
    """The tokens GET's body (the DRF view's and the lean route's)."""
    return {
        "token_count": session.token_count,
        "tokens_in_total": session.tokens_in_total,
        "tokens_out_total": session.tokens_out_total,
        "consumption": {
            "tokens_in": session.tokens_in_total,
            "tokens_out": session.tokens_out_total,
            "cache_creation_input_tokens": session.cache_creation_input_tokens_total,
            "cache_read_input_tokens": session.cache_read_input_tokens_total,
        },
    }


class TokensOutputSerializer(serializers.Serializer):
    token_count = serializers.IntegerField(help_text="The running sum compaction reads.")
    tokens_in_total = serializers.IntegerField(help_text="All input tokens, never reset.")
    tokens_out_total = serializers.IntegerField(help_text="All output tokens, never reset.")
    consumption = TokenConsumptionSerializer(
        help_text="All tokens by kind, cache writes and reads included, never reset."
    )


class TokensApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TokensAddInput"  # nested serializers all share the name "Input"

        # Bounded so a running sum can never overflow the 64-bit column.
        tokens_in = serializers.IntegerField(min_value=0, max_value=input_rules.MAX_TOKENS_PER_CALL)
        tokens_out = serializers.IntegerField(
            min_value=0, max_value=input_rules.MAX_TOKENS_PER_CALL
        )
        cache_creation_input_tokens = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=input_rules.MAX_TOKENS_PER_CALL
        )
        cache_read_input_tokens = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=input_rules.MAX_TOKENS_PER_CALL
        )

    @extend_schema(
        operation_id="session_tokens_retrieve",
        responses={200: TokensOutputSerializer, **NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        found = owned_or_unborn_session_id(request.user, session_id)
        session = Session() if found is None else owned_session(request.user, session_id)
        return Response(tokens_wire(session))

    @extend_schema(
        operation_id="session_tokens_add",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # Checked before a first write creates the session: a refused one creates nothing.
        session_id = owned_session_id_creating(request.user, session_id)
        usage = TokenUsage(**serializer.validated_data)
        with refused_input_as_400():
            services.tokens_add(session_id=session_id, usage=usage)
        return Response({"ok": True})


class TurnsOutputSerializer(serializers.Serializer):
    turn_count = serializers.IntegerField()


class TurnsApi(ApiView):
    @extend_schema(
        operation_id="session_turns_retrieve", responses={200: TurnsOutputSerializer, **NOT_FOUND}
    )
    def get(self, request: Request, session_id: str) -> Response:
        if owned_or_unborn_session_id(request.user, session_id) is None:
            return Response({"turn_count": 0})
        session = owned_session(request.user, session_id)
        return Response({"turn_count": session.turn_count})

    @extend_schema(
        operation_id="session_turns_increment",
        request=None,
        responses={200: OkSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id_creating(request.user, session_id)
        services.turn_increment(session_id=session_id)
        return Response({"ok": True})


class ResetCountersApi(ApiView):
    @extend_schema(
        operation_id="session_counters_reset",
        request=None,
        responses={200: OkSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id_creating(request.user, session_id)
        services.counters_reset(session_id=session_id)
        return Response({"ok": True})


class TasksApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TasksReplaceInput"  # nested serializers all share the name "Input"

        tasks = TaskSerializer(many=True, allow_empty=True)

        def validate_tasks(self, tasks: list[dict]) -> list[dict]:
            try:
                input_rules.check_unique_task_ids([task["id"] for task in tasks])
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
            return tasks

    @extend_schema(
        operation_id="session_tasks_list", responses={200: TaskSerializer(many=True), **NOT_FOUND}
    )
    def get(self, request: Request, session_id: str) -> Response:
        found = owned_or_unborn_session_id(request.user, session_id)
        return Response([] if found is None else _wire(selectors.read_tasks(found)))

    @extend_schema(
        operation_id="session_tasks_replace",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def put(self, request: Request, session_id: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # Checked before a first write creates the session: a refused one creates nothing.
        session_id = owned_session_id_creating(request.user, session_id)
        with refused_input_as_400():
            tasks = [to_core_task(t) for t in serializer.validated_data["tasks"]]
            services.tasks_replace(session_id=session_id, tasks=tasks)
        return Response({"ok": True})


class TaskUpdateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TaskUpdateInput"  # nested serializers all share the name "Input"

        updates = TaskUpdatesSerializer()

    @extend_schema(
        operation_id="session_task_update",
        request=InputSerializer,
        description="Glove's `updateTask`: an unknown task id is a silent no-op, as in Glove.",
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str, task_id: str) -> Response:
        session_id = owned_session_id(request.user, session_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        updates = task_updates_to_core(serializer.validated_data["updates"])
        if input_rules.could_name_a_row(task_id):  # else it names no stored task: a no-op
            with refused_input_as_400():
                services.task_update(session_id=session_id, task_id=task_id, updates=updates)
        return Response({"ok": True})


class PermissionQueryInputField(serializers.CharField):
    """A tool input in a query string, as JSON; left out means null."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("help_text", "The tool input as JSON; left out means null.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> object:
        text = super().to_internal_value(data)
        try:
            return JsonValueField().to_internal_value(json.loads(text))
        except (ValueError, RecursionError) as exc:
            raise ValidationError("must be JSON") from exc


class PermissionOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(PERMISSION_STATUSES))


class ResetQuerySerializer(serializers.Serializer):
    class Meta:
        ref_name = "PermissionResetQuery"

    toolName = serializers.CharField(max_length=200, required=False)
    input = PermissionQueryInputField(required=False)


class ResetOutputSerializer(serializers.Serializer):
    reset = serializers.IntegerField(help_text="How many remembered answers were forgotten.")


class PermissionsApi(ApiView):
    class QuerySerializer(serializers.Serializer):
        class Meta:
            ref_name = "PermissionQuery"

        toolName = serializers.CharField(max_length=200)
        input = serializers.CharField(
            required=False,
            trim_whitespace=False,
            help_text="The tool input as JSON; left out means null.",
        )

        def validate_input(self, value: str) -> object:
            try:
                return JsonValueField().to_internal_value(json.loads(value))
            except (ValueError, RecursionError) as exc:
                raise ValidationError("must be JSON") from exc

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PermissionSetInput"  # nested serializers all share the name "Input"

        toolName = serializers.CharField(max_length=200)
        status = serializers.ChoiceField(choices=list(PERMISSION_STATUSES))
        input = JsonValueField(required=False, allow_null=True, default=None)

    @extend_schema(
        operation_id="session_permission_retrieve",
        parameters=[QuerySerializer],
        responses={200: PermissionOutputSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        found = owned_or_unborn_session_id(request.user, session_id)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        key = permission_key(query.validated_data["toolName"], query.validated_data.get("input"))
        status = "unset" if found is None else selectors.read_permission(found, key)
        return Response({"status": status})

    @extend_schema(
        operation_id="session_permission_set",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def put(self, request: Request, session_id: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # Checked before a first write creates the session: a refused one creates nothing.
        session_id = owned_session_id_creating(request.user, session_id)
        data = serializer.validated_data
        with refused_input_as_400():
            services.permission_set(
                session_id=session_id,
                tool_name=data["toolName"],
                status=data["status"],
                tool_input=data["input"],
            )
        return Response({"ok": True})

    @extend_schema(
        operation_id="session_permissions_reset",
        description="Forget the session's remembered permission answers: every one, or with "
        "`toolName` (and `input`) the one for that call. The next call asks again.",
        parameters=[ResetQuerySerializer],
        responses={200: ResetOutputSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def delete(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id(request.user, session_id)
        query = ResetQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        tool_name = query.validated_data.get("toolName")
        key = None
        if tool_name is not None:
            key = permission_key(tool_name, query.validated_data.get("input"))
        forgotten = services.permissions_reset(session_id=session_id, key=key)
        return Response({"reset": forgotten})
