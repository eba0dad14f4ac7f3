"""A client asks for a person: `POST /api/sessions/<id>/handoff` {"reason": …, "group": …}.

    POST /api/sessions/<id>/handoff   the chat goes to a group's queue -> 200 {answerer}
                                      409 {error, answerer} when it is not the agent's
    GET  /api/sessions/<id>/handoff   who answers the chat now

For the session's owner, on the headless API's and the REST store's authentication (token,
or session cookie with CSRF); staff may read who answers. Anyone else gets the 404 of a
session that does not exist. The change is `conversations.handoff.handoff_request`, the
one the chat page's "Talk to a person" and the agent's `glove_request_human` make.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.agents.handoff_config import agent_handoff_group
from gloveapp.api.common.access import ApiView, Conflict, owned_session
from gloveapp.api.common.fields import ErrorSerializer, StrictCharField
from gloveapp.conversations import handoff
from gloveapp.conversations.access import viewable_session
from gloveapp.conversations.handoff_selectors import console_chat
from gloveapp.conversations.models import Session


class AnswererSerializer(serializers.Serializer):
    state = serializers.CharField(help_text="`agent`, `queued`, `person` or `closed`.")
    group = serializers.CharField(allow_null=True)
    person = serializers.CharField(allow_null=True, help_text="The staff member's first name.")
    label = serializers.CharField(help_text='In words: "Bea from the baristas answers this chat".')
    since = serializers.DateTimeField(allow_null=True)


class HandoffOutputSerializer(serializers.Serializer):
    answerer = AnswererSerializer()


def _answer(session: Session) -> Response:
    return Response({"answerer": handoff.answerer_of(console_chat(session.pk) or session)})


class SessionHandoffApi(ApiView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SessionHandoffInput"

        reason = StrictCharField(
            max_length=handoff.MAX_REASON,
            trim_whitespace=True,
            help_text="Why a person should answer (staff read it on the console).",
        )
        group = StrictCharField(
            max_length=150,
            required=False,
            allow_blank=True,
            help_text="The group whose staff should answer; default: the agent's handoff group.",
        )

    @extend_schema(
        operation_id="session_handoff_retrieve",
        description="Who answers the chat now: the agent, a group's queue, a person, or "
        "nobody (closed).",
        responses={200: HandoffOutputSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, session_id: str) -> Response:
        return _answer(viewable_session(request.user, session_id))

    @extend_schema(
        operation_id="session_handoff_create",
        description=(
            "Hand the chat to a person: it waits in the queue of `group` (the agent's "
            "handoff group by default) until a staff member claims it; the agent stays "
            "silent meanwhile. The customer's messages are kept and reach the person live. "
            "409 when the chat already waits for or is answered by a person (the answer "
            "says who)."
        ),
        request=InputSerializer,
        responses={
            200: HandoffOutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="`reason` or `group` is wrong."),
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        data = self.validated(self.InputSerializer, request.data)
        group = data.get("group") or agent_handoff_group(session.agent_name)
        if data.get("group") and not handoff.group_exists(data["group"]):
            raise ValidationError({"group": ["No such group."]})
        try:
            changed = handoff.handoff_request(
                session_id=session.pk,
                reason=data["reason"],
                group=group,
                actor=handoff.Actor(user=request.user),
                via="api",
            )
        except handoff.HandoffInvalid as invalid:
            raise ValidationError({invalid.field: [str(invalid)]}) from None
        except handoff.HandoffConflict as conflict:
            raise Conflict(str(conflict), answerer=conflict.current) from None
        # The row as the change left it (who answers now): no need to read it again.
        return Response({"answerer": handoff.answerer_of(changed)})
