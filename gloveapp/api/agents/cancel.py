"""`POST /api/sessions/<id>/cancel`: stop the session's running turn, wherever it runs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView, owned_session
from gloveapp.api.common.fields import ErrorSerializer
from gloveapp.turns.lifecycle import turn_cancel


class CancelOutputSerializer(serializers.Serializer):
    cancelled = serializers.BooleanField(help_text="False when no turn was running.")


class TurnCancelApi(ApiView):
    @extend_schema(
        operation_id="sessions_cancel",
        request=None,
        responses={200: CancelOutputSerializer, 404: ErrorSerializer},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        return Response({"cancelled": turn_cancel(session_id=session.pk, user_id=request.user.pk)})
