"""The remote store's messages, counters, tasks and permissions routes.

Each view checks its input with the route's serializer (the one schema, which the OpenAPI
description reads too), asks `gloveapp.conversations.access` for the caller's session (which
also turns the URL's id, the owner's own, into the session's global id the services take),
calls one service, and renders the runtime's wire format (glove-core field names). Writes go
through `ApiView.write`; where each rule lives: docs/explanation/performance.md.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView, owned_session_id, refused_input_as_400
from gloveapp.api.common.fields import (
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
from gloveapp.api.common.idempotency import (
    IDEMPOTENCY_KEY_PARAMETER,
    REPLAYED_HEADER,
    idempotency_errors,
    request_key,
)
from gloveapp.api.common.rendering import json_text_response, streamed_json_response
from gloveapp.conversations import idempotency, selectors, services
from gloveapp.conversations.access import (
    owned_or_unborn_session,
    owned_or_unborn_session_id,
    owned_session_id_creating,
    unused_key,
    usable_session_id,
)
from gloveapp.conversations.models import Session
from gloveapp.core import input_rules
from gloveapp.core.store import permission_key
from gloveapp.core.types import PERMISSION_STATUSES, TokenUsage
from gloveapp.lib import paging

NOT_FOUND = {404: ErrorSerializer}
# A page of a history over REST: the default and the most messages one page holds.
HISTORY_PAGE_DEFAULT = 100
HISTORY_PAGE_MAX = 1000


class HistoryTooLong(APIException):
    """400: an unpaged GET of a history longer than `GLOVE_HISTORY_UNPAGED_MAX`."""

    status_code = 400
    default_code = "history_too_long"

    def __init__(self, length: int, cap: int) -> None:
        super().__init__(
            {
                "error": (
                    f"limit: this history has {length:,} messages, more than the {cap:,} an "
                    f"unpaged GET returns; read it in pages (limit=1..{HISTORY_PAGE_MAX} with "
                    "before=<seq> or after=<seq>) or only what the model sees "
                    "(since_compaction=1)."
                ),
                "field": "limit",
                "code": "history_too_long",
            }
        )


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
        description=(
            "The session's history, oldest first. Without `limit`, `before` or `after` it is "
            "Glove's store GET: every message (from the last compaction with "
            "`since_compaction`) as a JSON array, whatever its length (a long one is streamed); "
            "an operator may cap it with `GLOVE_HISTORY_UNPAGED_MAX` (no cap by default), past "
            "which it answers 400 `history_too_long` naming `limit`. "
            "With any of them it is a keyset page: an object with `messages` (chronological), "
            "`firstSeq`, `lastSeq`, `hasEarlier` and `hasLater`; the next older page is "
            "`before=<firstSeq>`, the next newer `after=<lastSeq>`."
        ),
        parameters=[
            OpenApiParameter(
                "since_compaction",
                OpenApiTypes.BOOL,
                description="Only what the model sees: from the last compaction summary on.",
            ),
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=(
                    f"Messages per page, 1 to {HISTORY_PAGE_MAX} (default "
                    f"{HISTORY_PAGE_DEFAULT}); asks for a page instead of the whole history."
                ),
            ),
            OpenApiParameter(
                "before",
                OpenApiTypes.INT,
                description="A page of the newest messages older than this seq.",
            ),
            OpenApiParameter(
                "after",
                OpenApiTypes.INT,
                description="A page of the oldest messages newer than this seq.",
            ),
        ],
        responses={
            200: MessageSerializer(many=True),
            400: OpenApiResponse(
                ErrorSerializer,
                description=(
                    "A paging parameter is not valid (`field` names it), or an unpaged "
                    "history is longer than the operator's `GLOVE_HISTORY_UNPAGED_MAX` "
                    "(`history_too_long`)."
                ),
            ),
            **NOT_FOUND,
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        params = request.query_params
        since_compaction = _flag(request, "since_compaction")
        if any(name in params for name in ("limit", "before", "after")):
            return self._page(request, session_id, since_compaction)
        # One query for a history of up to one chunk: the ownership check is the history's
        # join (404 for an outsider). The body is the messages' stored wire texts, joined;
        # a longer history is streamed a chunk at a time.
        body = None
        if usable_session_id(session_id):
            try:
                body = selectors.stream_owned_messages_json(
                    session_id,
                    owner=request.user,
                    since_compaction=since_compaction,
                    cap=settings.GLOVE_HISTORY_UNPAGED_MAX or None,
                )
            except selectors.HistoryTooLong as exc:
                raise HistoryTooLong(exc.length, exc.cap) from None
        if body is None and unused_key(request.user, session_id):
            body = b"[]"  # a key its owner has not used yet: an empty history, nothing created
        if body is None:
            raise Http404("Session not found.")
        if isinstance(body, bytes):
            return json_text_response(request, body)
        return streamed_json_response(request, body)

    @staticmethod
    def _page(request: Request, session_id: str, since_compaction: bool) -> HttpResponse:
        params = request.query_params
        try:
            limit = paging.parse_limit(
                params.get("limit"), default=HISTORY_PAGE_DEFAULT, maximum=HISTORY_PAGE_MAX
            )
            before = paging.parse_seq(params.get("before"), field="before")
            after = paging.parse_seq(params.get("after"), field="after")
        except paging.PageParamError as exc:
            raise ValidationError({exc.field: [exc.message.split(": ", 1)[1]]}) from None
        page = None
        if usable_session_id(session_id):
            page = selectors.read_owned_messages_page(
                session_id,
                owner=request.user,
                limit=limit,
                before=before,
                after=after,
                since_compaction=since_compaction,
            )
        if page is None and unused_key(request.user, session_id):
            page = selectors.MessagesPage([], None, None, False, False)
        if page is None:
            raise Http404("Session not found.")
        body = (
            '{"messages":['
            + ",".join(page.texts)
            + "],"
            + json.dumps(
                {
                    "firstSeq": page.first_seq,
                    "lastSeq": page.last_seq,
                    "hasEarlier": page.has_earlier,
                    "hasLater": page.has_later,
                },
                separators=(",", ":"),
            )[1:]
        )
        return json_text_response(request, body.encode())

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
        data = self.validated(self.InputSerializer, request.data)["messages"]
        if key is None:
            # The hot write: the session's id from this process's memory, the append
            # checking that the row is still this owner's session of this key.
            owned_by = (request.user.pk, session_id)
            return self.write(
                request,
                session_id,
                lambda found: services.messages_append(
                    session_id=found,
                    messages=[to_core_message(m) for m in data],
                    owned_by=owned_by,
                ),
                remembered=True,
            )
        # An idempotent append: the first answer is kept with the write, in its transaction
        # (checked before a first write creates the session; a refused append takes the new
        # session back with it).
        key_in_url = session_id
        with refused_input_as_400(), idempotency_errors(), transaction.atomic():
            session_id = owned_session_id_creating(request.user, session_id)
            messages = [to_core_message(m) for m in data]

            def append() -> dict:
                services.messages_append(session_id=session_id, messages=messages)
                return {"ok": True}

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
    """The tokens GET's body."""
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
        return Response(tokens_wire(owned_or_unborn_session(request.user, session_id)))

    @extend_schema(
        operation_id="session_tokens_add",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        usage = TokenUsage(**self.validated(self.InputSerializer, request.data))
        return self.write(
            request, session_id, lambda found: services.tokens_add(session_id=found, usage=usage)
        )


class TurnsOutputSerializer(serializers.Serializer):
    turn_count = serializers.IntegerField()


class TurnsApi(ApiView):
    @extend_schema(
        operation_id="session_turns_retrieve", responses={200: TurnsOutputSerializer, **NOT_FOUND}
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = owned_or_unborn_session(request.user, session_id)
        return Response({"turn_count": session.turn_count})

    @extend_schema(
        operation_id="session_turns_increment",
        request=None,
        responses={200: OkSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        return self.write(
            request, session_id, lambda found: services.turn_increment(session_id=found)
        )


class ResetCountersApi(ApiView):
    @extend_schema(
        operation_id="session_counters_reset",
        request=None,
        responses={200: OkSerializer, **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        return self.write(
            request, session_id, lambda found: services.counters_reset(session_id=found)
        )


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
        data = self.validated(self.InputSerializer, request.data)["tasks"]
        return self.write(
            request,
            session_id,
            lambda found: services.tasks_replace(
                session_id=found, tasks=[to_core_task(t) for t in data]
            ),
        )


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
        updates = task_updates_to_core(
            self.validated(self.InputSerializer, request.data)["updates"]
        )
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
        query = self.validated(self.QuerySerializer, request.query_params)
        key = permission_key(query["toolName"], query.get("input"))
        status = "unset" if found is None else selectors.read_permission(found, key)
        return Response({"status": status})

    @extend_schema(
        operation_id="session_permission_set",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def put(self, request: Request, session_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        return self.write(
            request,
            session_id,
            lambda found: services.permission_set(
                session_id=found,
                tool_name=data["toolName"],
                status=data["status"],
                tool_input=data["input"],
            ),
        )

    @extend_schema(
        operation_id="session_permissions_reset",
        description="Forget the session's remembered permission answers: every one, or with "
        "`toolName` (and `input`) the one for that call. The next call asks again.",
        parameters=[ResetQuerySerializer],
        responses={200: ResetOutputSerializer, 400: ErrorSerializer, **NOT_FOUND},
    )
    def delete(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id(request.user, session_id)
        query = self.validated(ResetQuerySerializer, request.query_params)
        tool_name = query.get("toolName")
        key = None
        if tool_name is not None:
            key = permission_key(tool_name, query.get("input"))
        forgotten = services.permissions_reset(session_id=session_id, key=key)
        return Response({"reset": forgotten})
