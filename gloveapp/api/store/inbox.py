"""The remote store's inbox routes, in the paths of Glove's coffee example (contract §8.3).

Stricter than Glove: a duplicate id is 409 (not a 500; ids are per session, so only the
session's own), an unknown item is 404 (not a silent no-op), and updates follow the guarded
transitions (spec Decision 5), so a consumed item can never be resurrected over HTTP.

Resolution is not the session owner's: a non-staff caller may only add pending, unanswered
items and mark a resolved item consumed (what its own agent loop does). Resolving, adding
an answered item, or writing a response / resolved_at is 403 for them; staff (a service
account, glove-mesh) keep the full guarded transitions. Customers' answers come from
staff: `POST /api/inbox/resolve`, the admin, or a signed webhook.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import (
    ApiView,
    Conflict,
    NotFound,
    owned_session_id,
    refused_input_as_400,
)
from gloveapp.api.common.fields import (
    CursorField,
    ErrorSerializer,
    InboxItemSerializer,
    InboxUpdatesSerializer,
    OkSerializer,
    to_core_inbox_item,
)
from gloveapp.api.common.links import link_next
from gloveapp.conversations.access import owned_or_unborn_session_id
from gloveapp.core.store import DuplicateInboxItem, InboxItemNotFound, InboxTransitionError
from inbox import selectors
from inbox import services as inbox_services
from inbox.access import may_resolve
from inbox.selectors import CONSUMED_UNPAGED
from inbox.services import RESOLUTION_ELSEWHERE, InboxUpdateRefused

NOT_FOUND = {404: ErrorSerializer}
# The most consumed items one page of `?status=consumed` holds.
CONSUMED_PAGE_MAX = 500
# The name its cursors are signed for: a cursor of another list is refused here.
CONSUMED_LISTED = "api.session-inbox.consumed"
FORBIDDEN = {403: ErrorSerializer}


class Forbidden(APIException):
    status_code = 403
    default_detail = "Forbidden."
    default_code = "forbidden"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__({"error": message, "code": "inbox_resolution_forbidden", **extra})


def _check_owner_may_add(data: dict[str, Any]) -> None:
    """A non-staff caller adds only what its agent posts: pending and unanswered."""
    if data.get("status", "pending") != "pending":
        field, what = "item.status", f"status {data['status']!r}"
    elif data.get("response") is not None:
        field, what = "item.response", "a response"
    elif data.get("resolved_at") is not None:
        field, what = "item.resolved_at", "a resolved_at"
    else:
        return
    raise Forbidden(
        f"refused: adding an item with {what}; a session's owner may only add pending items "
        f"without response or resolved_at ({RESOLUTION_ELSEWHERE})",
        field=field,
    )


def _wire(items: list) -> list[dict]:
    return [item.to_dict() for item in items]


class InboxApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "InboxAddInput"  # nested serializers all share the name "Input"

        item = InboxItemSerializer()

    class QuerySerializer(serializers.Serializer):
        class Meta:
            ref_name = "InboxListQuery"

        status = serializers.ChoiceField(
            choices=["pending", "resolved", "consumed"],
            required=False,
            help_text="Only items of this status.",
        )
        limit = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=CONSUMED_PAGE_MAX,
            help_text=(
                f"With status=consumed: a page of consumed items, newest first, 1 to "
                f"{CONSUMED_PAGE_MAX}; the `Link` header names the next page."
            ),
        )
        cursor = CursorField(
            listed=CONSUMED_LISTED,
            help_text="With status=consumed: where the next page starts (from the `Link` header).",
        )

        def validate(self, attrs: dict) -> dict:
            if ("limit" in attrs or "cursor" in attrs) and attrs.get("status") != "consumed":
                raise serializers.ValidationError(
                    {"status": ["Pages are of consumed items: send status=consumed."]}
                )
            return attrs

    @extend_schema(
        operation_id="session_inbox_list",
        description=(
            "The session's inbox, oldest first: every open item (pending, resolved) and the "
            f"newest {CONSUMED_UNPAGED} consumed ones (Glove's getInboxItems returns every "
            "item; a long session's consumed items would come back forever). Older consumed "
            "items: `status=consumed` with `limit` (and `cursor`), newest first, in pages."
        ),
        parameters=[QuerySerializer],
        responses={200: InboxItemSerializer(many=True), 400: ErrorSerializer, **NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        query = self.validated(self.QuerySerializer, request.query_params)
        found = owned_or_unborn_session_id(request.user, session_id)
        if found is None:
            return Response([])
        if "limit" not in query and "cursor" not in query:
            return Response(_wire(selectors.read_inbox_items(found, query.get("status"))))
        items, following = selectors.consumed_inbox_page(
            found, limit=query.get("limit", CONSUMED_UNPAGED), cursor=query.get("cursor")
        )
        return link_next(Response(_wire(items)), request, following, listed=CONSUMED_LISTED)

    @extend_schema(
        operation_id="session_inbox_add",
        request=InputSerializer,
        description=(
            "Item ids are per session: an id another session's item has is granted like a "
            "fresh one (resolvers then name the item by the global id the admin shows)."
        ),
        responses={
            201: OkSerializer,
            400: ErrorSerializer,
            409: OpenApiResponse(
                ErrorSerializer, description="This session already has an item with this id."
            ),
            **FORBIDDEN,
            **NOT_FOUND,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)["item"]
        if not may_resolve(request.user):
            _check_owner_may_add(data)
        try:
            return self.write(
                request,
                session_id,
                lambda found: inbox_services.inbox_item_add(
                    session_id=found, item=to_core_inbox_item(data)
                ),
                status=status.HTTP_201_CREATED,
            )
        except DuplicateInboxItem as exc:
            raise Conflict(str(exc), code="duplicate_inbox_item", field="item.id") from None


class InboxUpdateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "InboxUpdateInput"  # nested serializers all share the name "Input"

        itemId = serializers.CharField(max_length=128)
        updates = InboxUpdatesSerializer()

    @extend_schema(
        operation_id="session_inbox_update",
        request=InputSerializer,
        responses={
            200: OkSerializer,
            400: ErrorSerializer,
            409: ErrorSerializer,
            **FORBIDDEN,
            **NOT_FOUND,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        item_id = data["itemId"]
        try:
            with refused_input_as_400():
                inbox_services.inbox_item_update(
                    session_id=session_id,
                    item_id=item_id,
                    updates=dict(data["updates"]),
                    # A resolution through the REST store is the caller's, not an agent's.
                    resolved_by="api",
                    user=request.user,
                    may_resolve=may_resolve(request.user),
                )
        except InboxUpdateRefused as exc:
            raise Forbidden(str(exc), item_id=item_id) from None
        except InboxItemNotFound as exc:
            raise NotFound(str(exc), code="inbox_item_not_found", item_id=item_id) from None
        except InboxTransitionError as exc:
            raise Conflict(
                str(exc),
                code="inbox_transition",
                item_id=item_id,
                current_status=exc.current_status,
                requested_status=exc.requested_status,
            ) from None
        return Response({"ok": True})


class InboxResolvedApi(ApiView):
    @extend_schema(
        operation_id="session_inbox_resolved",
        responses={200: InboxItemSerializer(many=True), **NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        found = owned_or_unborn_session_id(request.user, session_id)
        return Response(
            [] if found is None else _wire(selectors.read_inbox_items(found, "resolved"))
        )


class InboxConsumeApi(ApiView):
    @extend_schema(
        operation_id="session_inbox_consume",
        request=None,
        description=(
            "Return every resolved item and mark it consumed, in one step: two agents "
            "polling one session never both receive an item (spec Decision 3)."
        ),
        responses={200: InboxItemSerializer(many=True), **NOT_FOUND},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session_id = owned_session_id(request.user, session_id)
        return Response(_wire(inbox_services.inbox_items_consume_resolved(session_id=session_id)))
