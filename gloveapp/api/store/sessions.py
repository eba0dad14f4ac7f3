"""`/api/sessions` and `/api/sessions/<id>`: a caller's conversations."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.agents.config import AgentNotStartable, startable_agent
from gloveapp.api.common.access import ApiView, Conflict, owned_session, refused_input_as_400
from gloveapp.api.common.fields import CursorField, ErrorSerializer, OkSerializer
from gloveapp.api.common.links import link_next
from gloveapp.conversations import selectors, services
from gloveapp.conversations.access import viewable_session
from gloveapp.core.input_rules import SESSION_ID_RE
from gloveapp.turns.timeline import DEFAULT_TURNS, MAX_TURNS, session_timelines
from gloveapp.turns.usage import session_usage_cost

# A page of `GET /api/sessions`: the default and the most sessions one page holds.
SESSIONS_PAGE_DEFAULT = 100
SESSIONS_PAGE_MAX = 500
# The name its cursors are signed for: a cursor of another list is refused here.
SESSIONS_LISTED = "api.sessions"


class SessionOutputSerializer(serializers.Serializer):
    # The id the owner chose: ids are per owner (gloveapp.conversations.models.Session).
    sessionId = serializers.CharField(source="key")
    title = serializers.CharField()
    # The coffee example calls the title `name`; both are sent so its UI works unchanged.
    name = serializers.CharField(source="title")
    agentName = serializers.CharField(source="agent_name")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    tokenCount = serializers.IntegerField(source="token_count")
    turnCount = serializers.IntegerField(source="turn_count")
    # A subagent's session names the session whose agent delegated it, by the id its owner
    # (the same user) knows it by; null for a conversation nobody delegated.
    parentSessionId = serializers.CharField(
        source="parent.key",
        allow_null=True,
        help_text="The session whose agent delegated this one to a subagent; null if none.",
    )


class SessionListApi(ApiView):
    class QuerySerializer(serializers.Serializer):
        class Meta:
            ref_name = "SessionListQuery"

        parent = serializers.CharField(
            required=False,
            trim_whitespace=False,
            help_text="Only this session's subagent sessions (404 if it is not yours).",
        )
        topLevel = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Only the sessions no agent delegated, as the chat list shows them.",
        )
        limit = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=SESSIONS_PAGE_MAX,
            help_text=(
                f"Sessions per page, 1 to {SESSIONS_PAGE_MAX} (default {SESSIONS_PAGE_DEFAULT})."
            ),
        )
        cursor = CursorField(
            listed=SESSIONS_LISTED,
            help_text=(
                'Where the next page starts: the `cursor` of the `Link: <...>; rel="next"` '
                "header of the page before (opaque)."
            ),
        )

        def validate(self, attrs: dict) -> dict:
            if attrs.get("topLevel") and "parent" in attrs:
                raise serializers.ValidationError(
                    {"topLevel": ["A subagent session is never top-level: send one of the two."]}
                )
            return attrs

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SessionCreateInput"  # nested serializers all share the name "Input"

        sessionId = serializers.RegexField(
            SESSION_ID_RE,
            required=False,
            error_messages={"invalid": "may only hold letters, digits and _ . : - (1-128)"},
        )
        title = serializers.CharField(required=False, allow_blank=True, max_length=200)
        name = serializers.CharField(required=False, allow_blank=True, max_length=200)
        agentName = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=100,
            help_text="The configured agent the session talks to (empty: the default one); "
            "only an agent open to the caller (`open_to` in GLOVE_AGENTS), else a 400.",
        )

    @extend_schema(
        operation_id="sessions_list",
        description=(
            "The caller's sessions, newest first, subagents' sessions included (each "
            "names its parent in `parentSessionId`); `parent` or `topLevel` narrow the list. "
            f"One page of `limit` (default {SESSIONS_PAGE_DEFAULT}, at most "
            f"{SESSIONS_PAGE_MAX}): when more follow, the `Link` header names the next page "
            '(`rel="next"`, with its `cursor`), as a keyset page: the same cost for every page.'
        ),
        parameters=[QuerySerializer],
        responses={
            200: SessionOutputSerializer(many=True),
            400: ErrorSerializer,
            404: OpenApiResponse(ErrorSerializer, description="`parent` is not your session."),
        },
    )
    def get(self, request: Request) -> Response:
        query = self.validated(self.QuerySerializer, request.query_params)
        parent = None
        if "parent" in query:
            parent = owned_session(request.user, query["parent"])
        sessions, next_cursor = selectors.sessions_page(
            selectors.sessions_with_parents(
                request.user, parent=parent, top_level=query["topLevel"]
            ),
            limit=query.get("limit", SESSIONS_PAGE_DEFAULT),
            cursor=query.get("cursor"),
        )
        response = Response(SessionOutputSerializer(sessions, many=True).data)
        return link_next(response, request, next_cursor, listed=SESSIONS_LISTED)

    @extend_schema(
        operation_id="sessions_create",
        request=InputSerializer,
        description=(
            "Session ids are per user: an id another user has (or had) is granted like a "
            "fresh one, so the answer never tells whether someone else uses it."
        ),
        responses={
            201: SessionOutputSerializer,
            400: ErrorSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description=(
                    "You already have a session with this id, or had one and deleted it "
                    "(an id is never reused). Never about another user's ids."
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        try:
            startable_agent(data.get("agentName", ""), request.user)
        except AgentNotStartable as refused:
            raise ValidationError({refused.field: [str(refused)]}) from None
        try:
            with refused_input_as_400():
                session = services.session_create(
                    owner=request.user,
                    session_id=data.get("sessionId"),
                    title=data.get("title", data.get("name", "")),
                    agent_name=data.get("agentName", ""),
                )
        except services.DuplicateSession as exc:
            raise Conflict(str(exc), code="duplicate_session", field="sessionId") from None
        return Response(SessionOutputSerializer(session).data, status=status.HTTP_201_CREATED)


class UsageSerializer(serializers.Serializer):
    tokensIn = serializers.IntegerField(source="tokens_in_total")
    tokensOut = serializers.IntegerField(source="tokens_out_total")
    cacheReadTokens = serializers.IntegerField(source="cache_read_input_tokens_total")
    cacheWriteTokens = serializers.IntegerField(source="cache_creation_input_tokens_total")


class CostSerializer(serializers.Serializer):
    usd = serializers.CharField(
        allow_null=True,
        help_text="US dollars as a decimal string, over the models with a price; null when "
        "no model used had one.",
    )
    complete = serializers.BooleanField(
        help_text="False when a model used has no price (GLOVE_MODEL_PRICES): the true cost "
        "is then more than `usd`, by an unknown amount."
    )
    unknownModels = serializers.ListField(
        child=serializers.CharField(), source="unknown_models", help_text="Models without a price."
    )
    byModel = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        source="by_model",
        help_text="US dollars per model used (null: the model has no price).",
    )


def session_usage(session) -> dict:
    return {
        "tokensIn": session.tokens_in_total,
        "tokensOut": session.tokens_out_total,
        "cacheReadTokens": session.cache_read_input_tokens_total,
        "cacheWriteTokens": session.cache_creation_input_tokens_total,
    }


def session_cost(session) -> dict:
    found = session_usage_cost(session).as_dict()
    return {
        "usd": found["usd"],
        "complete": found["complete"],
        "unknownModels": found["unknown_models"],
        "byModel": found["by_model"],
    }


class SessionDetailOutputSerializer(SessionOutputSerializer):
    """A session with its token usage and what it cost (its turns' usage, priced).

    It documents the route; the route builds the same answer with `session_detail`."""

    usage = serializers.SerializerMethodField()
    cost = serializers.SerializerMethodField()

    @extend_schema_field(UsageSerializer)
    def get_usage(self, session) -> dict:
        return session_usage(session)

    @extend_schema_field(CostSerializer)
    def get_cost(self, session) -> dict:
        return session_cost(session)


def session_detail(session) -> dict:
    """`SessionDetailOutputSerializer`'s answer, its usage and cost added as plain dicts:
    this route is a hot read, and two more serializer fields (copied and bound for every
    answer) cost it 3 % (bench/observe_overhead.py)."""
    data = SessionOutputSerializer(session).data
    data["usage"] = session_usage(session)
    data["cost"] = session_cost(session)
    return data


class SessionDetailApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SessionUpdateInput"  # nested serializers all share the name "Input"

        title = serializers.CharField(required=False, allow_blank=True, max_length=200)
        name = serializers.CharField(required=False, allow_blank=True, max_length=200)

        def validate(self, attrs: dict) -> dict:
            if "title" not in attrs and "name" not in attrs:
                raise serializers.ValidationError({"title": ["This field is required."]})
            return attrs

    @extend_schema(
        operation_id="sessions_retrieve",
        responses={200: SessionDetailOutputSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        return Response(session_detail(session))

    @extend_schema(
        operation_id="sessions_update",
        request=InputSerializer,
        responses={200: OkSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def patch(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        with refused_input_as_400():
            services.session_update(session=session, title=data.get("title", data.get("name", "")))
        return Response({"ok": True})

    @extend_schema(operation_id="sessions_destroy", responses={204: None, 404: ErrorSerializer})
    def delete(self, request: Request, session_id: str) -> Response:
        services.session_delete(session=owned_session(request.user, session_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TimelineQuery(serializers.Serializer):
    class Meta:
        ref_name = "TimelineQuery"

    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TURNS,
        default=DEFAULT_TURNS,
        help_text=f"How many turns (at most {MAX_TURNS}), newest first.",
    )
    before = serializers.IntegerField(
        required=False, min_value=1, help_text="Only turns older than this turn id (the `next`)."
    )


class SessionTimelineApi(ApiView):
    """A session's turns as timelines: each turn's steps (its wait in the queue, attempts,
    model calls with their tokens, tool calls, waits on a person) with their start, duration
    and outcome, newest turn first. Staff read any session's (by its global id, as on
    the pages) and also see which worker ran each step."""

    @extend_schema(
        operation_id="sessions_timeline",
        parameters=[TimelineQuery],
        responses={200: OpenApiResponse(description="`{turns: [...], next: turn id or null}`")},
    )
    def get(self, request: Request, session_id: str) -> Response:
        query = self.validated(TimelineQuery, request.query_params)
        # Whoever may see the session: its owner by their id, staff by its global id too.
        session = viewable_session(request.user, session_id)
        found = session_timelines(session.pk, before=query.get("before"), limit=query["limit"])
        staff = bool(request.user.is_staff)
        return Response(
            {
                "turns": [timeline.to_dict(with_workers=staff) for timeline in found],
                "next": found[-1].turn_id if len(found) == query["limit"] else None,
            }
        )
