"""`/api/approvals/`: staff list, read and decide approval requests.

    GET  /api/approvals/?view=mine|groups|unassigned|overdue|all&status=open&limit=50&cursor=…
    GET  /api/approvals/<id>
    POST /api/approvals/<id>/decide   {decision, fingerprint, requestId?, args?, reason?, text?}

Staff only (a DRF token or the staff session). Anyone else gets 404 for any id, existing or
not, and 403 for the list. A decision goes through `approval_decide`: 400 for a decision the
request does not allow or a bad edit, 403 when it is assigned to someone else, 409 when it
was decided already (the body's `winner` names that decision) or the fingerprint is stale
(`fingerprint` is the current one).

A signed webhook decision must name the request in its signed body (`requestId`, equal to
the path's id; else a 400 naming it): the signature covers the body, not the path, so a
decision signed for one request can never be posted to another with the same fingerprint.
Each signature is accepted once (`inbox.webhooks`).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView
from gloveapp.api.common.auth import SameOriginJsonSessionAuthentication
from gloveapp.api.common.fields import CursorField, ErrorSerializer
from gloveapp.api.common.token_auth import CachedTokenAuthentication
from gloveapp.approvals.access import is_approver
from gloveapp.approvals.selectors import (
    MAX_OFFSET,
    MAX_PAGE,
    STATUSES,
    VIEWS,
    after_cursor,
    approval_data,
    approval_for_system,
    approval_visible,
    approvals_queue,
    decision_of,
    group_ids,
    page_of,
)
from gloveapp.approvals.services import (
    ApprovalConflict,
    ApprovalNotFound,
    DecisionInvalid,
    NotYoursToDecide,
    StaleDecision,
    approval_decide,
)
from gloveapp.core.approvals.decisions import DECISIONS, Decision
from gloveapp.lib import paging
from gloveapp.lib.db.replicas import lag_tolerant, pinned_to_primary
from inbox.webhooks import WebhookSignatureAuthentication

NOT_FOUND = "No such approval request."


class ApprovalPartySerializer(serializers.Serializer):
    user = serializers.CharField(allow_null=True)
    group = serializers.CharField(allow_null=True)


class ApprovalDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=DECISIONS)
    by = serializers.CharField(allow_null=True)
    channel = serializers.CharField()
    decidedAt = serializers.DateTimeField()
    fingerprint = serializers.CharField()
    args = serializers.JSONField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    text = serializers.CharField(allow_null=True)


class ApprovalRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    sessionId = serializers.CharField()
    tool = serializers.CharField()
    callId = serializers.CharField(allow_null=True)
    args = serializers.JSONField()
    fingerprint = serializers.CharField()
    decisions = serializers.ListField(child=serializers.ChoiceField(choices=DECISIONS))
    inputSchema = serializers.JSONField(allow_null=True)
    status = serializers.ChoiceField(choices=["open", "decided", "withdrawn"])
    assignee = ApprovalPartySerializer()
    escalateTo = ApprovalPartySerializer()
    createdAt = serializers.DateTimeField()
    remindAt = serializers.DateTimeField(allow_null=True)
    escalateAt = serializers.DateTimeField(allow_null=True)
    escalatedAt = serializers.DateTimeField(allow_null=True)
    expiresAt = serializers.DateTimeField(allow_null=True)
    onExpire = serializers.CharField()
    secondsLeft = serializers.IntegerField(allow_null=True)
    mayDecide = serializers.BooleanField()
    decision = ApprovalDecisionSerializer(allow_null=True)


# The list counts its queue up to this many rows, never more: `?status=decided` is a
# history of a million rows, and an exact count read them all on every page.
COUNT_CAP = 1000
# The name its cursors are signed for: a cursor of another list is refused here.
APPROVALS_LISTED = "api.approvals"


class ApprovalListSerializer(serializers.Serializer):
    results = ApprovalRequestSerializer(many=True)
    count = serializers.IntegerField(
        help_text=f"Requests in the queue, counted up to {COUNT_CAP:,} (see `countExact`)."
    )
    countExact = serializers.BooleanField(
        help_text=f"False when the queue holds more than {COUNT_CAP:,}: `count` is then a floor."
    )
    next = serializers.IntegerField(
        allow_null=True, help_text="The next page's `offset` (prefer `nextCursor`)."
    )
    nextCursor = serializers.CharField(
        allow_null=True,
        help_text="The next page's `cursor` (a keyset page: the same cost at any depth).",
    )


class ApprovalConflictSerializer(serializers.Serializer):
    error = serializers.CharField()
    winner = ApprovalDecisionSerializer(allow_null=True)
    fingerprint = serializers.CharField(required=False)


class ApprovalDecideInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=DECISIONS)
    fingerprint = serializers.CharField(max_length=64)
    requestId = serializers.CharField(
        required=False,
        max_length=64,
        help_text="The request decided; required in a signed webhook's body, and when given "
        "it must be the path's id.",
    )
    args = serializers.DictField(required=False, allow_null=True)
    reason = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=10_000
    )
    text = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=10_000
    )


class ApprovalListQuerySerializer(serializers.Serializer):
    view = serializers.ChoiceField(choices=VIEWS, default="all")
    status = serializers.ChoiceField(choices=STATUSES, default="open")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=50)
    offset = serializers.IntegerField(
        min_value=0,
        max_value=MAX_OFFSET,
        default=0,
        help_text=f"Rows to skip, at most {MAX_OFFSET:,} (an offset reads what it skips): "
        "page with `cursor` instead.",
    )
    cursor = CursorField(
        listed=APPROVALS_LISTED,
        help_text="Where the next page starts: the `nextCursor` of the page before.",
    )

    def validate(self, attrs: dict) -> dict:
        if attrs.get("offset") and "cursor" in attrs:
            raise serializers.ValidationError({"cursor": ["Send a cursor or an offset, not both."]})
        return attrs


def _not_found() -> Response:
    return Response({"error": NOT_FOUND}, status=404)


class ApprovalListApi(ApiView):
    @extend_schema(
        operation_id="approvals_list",
        parameters=[ApprovalListQuerySerializer],
        responses={
            200: ApprovalListSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> Response:
        if not is_approver(request.user):
            return Response({"error": "Approvals are for staff."}, status=403)
        query = ApprovalListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        # The decided history tolerates a replica's lag (gloveapp/lib/db/replicas.py); the open queue,
        # which people act on, and a reader who just decided read the primary.
        history = options["status"] != "open" and not pinned_to_primary(request)
        with lag_tolerant() if history else contextlib.nullcontext():
            rows = approvals_queue(
                user=request.user, view=options["view"], status=options["status"]
            )
            offset, limit = options["offset"], options["limit"]
            cursor = options.get("cursor")
            page = page_of(after_cursor(rows, cursor), offset=offset, limit=limit)
            more = len(page) > limit
            page = page[:limit]
            decisions = _decisions(page)
            groups = group_ids(request.user)
            # COUNT(*) over at most COUNT_CAP + 1 rows of the queue's index range, without the
            # page's order: a count needs none, and a kept one may sort every matching row.
            counted = rows.order_by()[: COUNT_CAP + 1].count()
        return Response(
            {
                "results": [
                    approval_data(
                        row, user=request.user, decision=decisions.get(row.pk), group_ids=groups
                    )
                    for row in page
                ],
                "count": min(counted, COUNT_CAP),
                "countExact": counted <= COUNT_CAP,
                "next": offset + limit if more and cursor is None else None,
                "nextCursor": paging.Cursor(at=page[-1].created_at, tie=str(page[-1].pk)).encode(
                    APPROVALS_LISTED
                )
                if more
                else None,
            }
        )


def _decisions(rows: list[Any]) -> dict[Any, Any]:
    from gloveapp.approvals.models import ApprovalDecision

    decided = [row.pk for row in rows if row.status == "decided"]
    if not decided:
        return {}
    return {d.request_id: d for d in ApprovalDecision.objects.filter(request_id__in=decided)}


class ApprovalDetailApi(ApiView):
    @extend_schema(
        operation_id="approvals_read",
        parameters=[OpenApiParameter("approval_id", OpenApiTypes.STR, OpenApiParameter.PATH)],
        responses={200: ApprovalRequestSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, approval_id: str) -> Response:
        row = approval_visible(user=request.user, request_id=approval_id)
        if row is None:
            return _not_found()
        return Response(approval_data(row, user=request.user, decision=decision_of(row)))


class ApprovalDecideApi(ApiView):
    # A signed webhook (a chat tool's button, another system) decides too, as the inbox
    # webhooks resolve: recorded with the channel "webhook" and no user.
    authentication_classes = [
        CachedTokenAuthentication,
        WebhookSignatureAuthentication,
        SameOriginJsonSessionAuthentication,
    ]

    @extend_schema(
        operation_id="approvals_decide",
        parameters=[OpenApiParameter("approval_id", OpenApiTypes.STR, OpenApiParameter.PATH)],
        request=ApprovalDecideInputSerializer,
        responses={
            200: ApprovalRequestSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ApprovalConflictSerializer,
        },
    )
    def post(self, request: Request, approval_id: str) -> Response:
        signed = request.auth == "webhook"
        row = (
            approval_for_system(request_id=approval_id)
            if signed
            else approval_visible(user=request.user, request_id=approval_id)
        )
        if row is None:
            return _not_found()
        data = ApprovalDecideInputSerializer(
            data=request.data if isinstance(request.data, dict) else {}
        )
        data.is_valid(raise_exception=True)
        given = data.validated_data
        named = given.get("requestId")
        if (signed or named is not None) and not _names(named, row.pk):
            return Response(
                {
                    "error": "requestId must name the request decided (the path's id); a "
                    "signed decision names it in its body.",
                    "field": "requestId",
                },
                status=400,
            )
        decision = Decision(
            kind=given["decision"],
            fingerprint=given["fingerprint"],
            args=given.get("args"),
            reason=given.get("reason") or None,
            text=given.get("text") or None,
        )
        if signed:
            return decide_response(row, decision=decision, user=None, channel="webhook")
        return decide_response(row, decision=decision, user=request.user, channel="rest")


def _names(given: str | None, pk: Any) -> bool:
    try:
        return given is not None and uuid.UUID(given) == pk
    except ValueError:
        return False


def decide_response(row: Any, *, decision: Decision, user: Any, channel: str) -> Response:
    """`approval_decide` with its refusals as REST answers (shared with the page's JSON)."""
    try:
        made = approval_decide(request_id=row.pk, decision=decision, user=user, channel=channel)
    except ApprovalNotFound:
        return _not_found()
    except NotYoursToDecide as error:
        return Response({"error": str(error)}, status=403)
    except DecisionInvalid as error:
        return Response({"error": str(error), "field": error.field}, status=400)
    except StaleDecision as error:
        return Response(
            {"error": str(error), "winner": None, "fingerprint": row.fingerprint}, status=409
        )
    except ApprovalConflict as error:
        return Response({"error": str(error), "winner": error.winner}, status=409)
    row.refresh_from_db()
    return Response(approval_data(row, user=user, decision=made))
