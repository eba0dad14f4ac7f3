"""`POST /api/inbox/resolve`: resolve an inbox item from outside (a webhook, a staff tool).

Body `{itemId, response}` (Glove's text resolution), or `{itemId, decision, reason?}` /
`{itemId, decision: "respond", response}` for an item that declares its decisions
(approve, reject, respond). Answers 200 `{ok: true, itemId}`; 400 for bad input or a
decision the item does not allow (the body's `field` names the input); 404 for an
unknown id; 409 when the item is no longer pending (the body says "already resolved" or
"already consumed"). Callers: a staff user (DRF token or session), or a signed webhook.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView
from gloveapp.api.common.auth import SameOriginJsonSessionAuthentication
from gloveapp.api.common.token_auth import CachedTokenAuthentication
from gloveapp.core.approvals.decisions import DecisionRefused
from gloveapp.core.approvals.inbox import INBOX_DECISIONS
from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from inbox.access import may_resolve
from inbox.services import inbox_item_resolve
from inbox.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookSignatureAuthentication

REQUIRED = "itemId and response are required"


class IsStaffOrSignedWebhook(BasePermission):
    message = "Resolving inbox items needs a staff account or a signed webhook."

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.auth == "webhook":
            return True
        return may_resolve(request.user)


ErrorBody = inline_serializer("InboxResolveError", {"error": serializers.CharField()})


class InboxResolveApi(ApiView):
    authentication_classes = [
        CachedTokenAuthentication,
        WebhookSignatureAuthentication,
        # Staff tools in the browser post plain same-origin JSON, like the store routes.
        SameOriginJsonSessionAuthentication,
    ]
    permission_classes = [IsStaffOrSignedWebhook]

    class InputSerializer(serializers.Serializer):
        itemId = serializers.CharField(max_length=128, trim_whitespace=False)
        response = serializers.CharField(trim_whitespace=False, required=False)
        decision = serializers.ChoiceField(
            INBOX_DECISIONS,
            required=False,
            help_text="For an item that declares decisions; omitted: a text response.",
        )
        reason = serializers.CharField(
            trim_whitespace=False,
            required=False,
            help_text="With approve or reject: what the agent reads after the decision.",
        )

    @extend_schema(
        operation_id="inbox_resolve",
        request=InputSerializer,
        parameters=[
            OpenApiParameter(TIMESTAMP_HEADER, str, OpenApiParameter.HEADER, required=False),
            OpenApiParameter(
                SIGNATURE_HEADER,
                str,
                OpenApiParameter.HEADER,
                required=False,
                description='"sha256=" + hex HMAC-SHA256 of "{timestamp}.{raw body}"',
            ),
        ],
        responses={
            200: inline_serializer(
                "InboxResolveOk",
                {"ok": serializers.BooleanField(), "itemId": serializers.CharField()},
            ),
            400: ErrorBody,
            401: ErrorBody,
            403: ErrorBody,
            404: ErrorBody,
            409: ErrorBody,
        },
    )
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        decided = data.get("decision") is not None
        if not data.get("itemId") or not (decided or data.get("response")):
            return Response({"error": REQUIRED}, status=status.HTTP_400_BAD_REQUEST)
        for field in ("itemId", "response", "decision", "reason"):
            if field in data and not isinstance(data[field], str):
                if field in ("response", "reason") and data[field] is None:
                    continue
                return Response(
                    {"error": f"{field} must be a string", "field": field},
                    status=status.HTTP_400_BAD_REQUEST,
                )
        if decided and data["decision"] not in INBOX_DECISIONS:
            return Response(
                {"error": "decision must be one of approve, reject, respond", "field": "decision"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        data = {key: value for key, value in data.items() if value is not None}
        serializer = self.InputSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        item_id = serializer.validated_data["itemId"]
        if request.auth == "webhook":
            resolver: dict[str, Any] = {"resolved_by": "webhook"}
        else:
            resolver = {"resolved_by": "api", "user": request.user}
        try:
            inbox_item_resolve(
                item_id=item_id,
                response=serializer.validated_data.get("response"),
                decision=serializer.validated_data.get("decision"),
                reason=serializer.validated_data.get("reason"),
                **resolver,
            )
        except InboxItemNotFound as exc:
            return Response({"error": str(exc), "itemId": item_id}, status=404)
        except InboxTransitionError as exc:
            return Response(
                {"error": str(exc), "itemId": item_id, "status": exc.current_status}, status=409
            )
        except DecisionRefused as exc:
            return Response(
                {"error": str(exc), "field": exc.field, "itemId": item_id},
                status=status.HTTP_400_BAD_REQUEST,
            )
        except ValueError as exc:
            return Response({"error": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"ok": True, "itemId": item_id})
