"""Signed chat URLs: `/api/chat` for clients that can send neither a cookie nor a header.

glove-react's `createEndpointModel` posts JSON to a fixed URL and offers no way to add an
`Authorization` header or credentials. A server-side app (Node) or a page on another origin
therefore asks, once, with its token or session:

    POST /api/sessions/<id>/chat-url  ->  {"url": ".../api/chat/<signed>", "expiresAt": ...}

and passes that URL as `useGlove({ endpoint })`. The URL is the credential: signed with
SECRET_KEY, bound to the user and one of their sessions, and valid for
GLOVE_CHAT_URL_TTL_SECONDS (15 minutes by default). It stops working when it expires, when a
character of it changes, when the session is deleted, and when the user's password changes:
it carries a keyed digest of the user's current password hash, as Django's password-reset
tokens do (without it, a URL outlived the password it was minted under). Because it carries
no cookie, the chat route under it answers CORS preflights from any origin (a leaked URL is as good as a
leaked token for its short life, and no more).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView, owned_session, owned_session_id
from gloveapp.api.common.fields import ErrorSerializer
from gloveapp.api.common.idempotency import IDEMPOTENCY_KEY_PARAMETER
from gloveapp.api.store.chat import ChatApi
from gloveapp.core.types import iso_format

SALT = "gloveapp.chat-url"


@dataclass(frozen=True, slots=True)
class ChatUrlGrant:
    """`request.auth` on a signed chat URL: which session it was minted for (its global id)."""

    session_id: str


def password_binding(user: Any) -> str:
    """A digest of the user's current password hash (readable in the token, so keyed:
    it tells nothing about the hash)."""
    return salted_hmac(SALT, user.password or "", algorithm="sha256").hexdigest()[:32]


def chat_url_token(*, user: Any, session_key: str) -> str:
    # The owner's own id for the session (a signed value is readable, not secret): the
    # token shows nothing they did not choose.
    return signing.dumps({"u": user.pk, "s": session_key, "p": password_binding(user)}, salt=SALT)


def chat_url_grant(token: str) -> tuple[Any, ChatUrlGrant]:
    """The user and session a token was minted for; AuthenticationFailed if it is not valid."""
    try:
        payload = signing.loads(token, salt=SALT, max_age=settings.GLOVE_CHAT_URL_TTL_SECONDS)
    except signing.SignatureExpired:
        raise AuthenticationFailed("This chat URL has expired; ask for a new one.") from None
    except signing.BadSignature:
        raise AuthenticationFailed("This chat URL is not valid.") from None
    user = get_user_model().objects.filter(pk=payload.get("u"), is_active=True).first()
    key = payload.get("s")
    bound = payload.get("p")
    try:
        if user is None or not isinstance(key, str) or not isinstance(bound, str):
            raise Http404
        if not constant_time_compare(bound, password_binding(user)):
            raise AuthenticationFailed(
                "This chat URL was made before the password changed; ask for a new one."
            )
        session_id = owned_session_id(user, key)
    except Http404:
        raise AuthenticationFailed("This chat URL is not valid.") from None
    return user, ChatUrlGrant(session_id=session_id)


class ChatUrlAuthentication(BaseAuthentication):
    """Authenticates by the signed token in the URL path (and nothing else)."""

    def authenticate(self, request: Request) -> tuple[Any, ChatUrlGrant] | None:
        kwargs = (request.parser_context or {}).get("kwargs", {})
        return chat_url_grant(kwargs.get("token", ""))

    def authenticate_header(self, request: Request) -> str:
        return 'ChatUrl realm="api"'  # makes DRF answer 401, not 403


class ChatUrlScheme(OpenApiAuthenticationExtension):
    """The schema's word for the signed chat URL: no security scheme, since the credential
    is the path's `token` (OpenAPI has no scheme for a credential in the path; a header
    named after a sentence broke generated clients). The operation's `security` is `[{}]`."""

    target_class = ChatUrlAuthentication
    name: list[str] = []  # no security scheme to declare

    def get_security_requirement(self, auto_schema):
        return {}

    def get_security_definition(self, auto_schema):
        return []


class ChatUrlPermission(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method == "OPTIONS" or isinstance(request.auth, ChatUrlGrant)


class ChatUrlOutputSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="Absolute URL to pass as glove-react's `endpoint`.")
    path = serializers.CharField(help_text="The same URL without scheme and host.")
    expiresAt = serializers.CharField()


class ChatUrlMintApi(ApiView):
    @extend_schema(
        operation_id="session_chat_url",
        request=None,
        responses={200: ChatUrlOutputSerializer, 404: ErrorSerializer},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = owned_session(request.user, session_id)
        token = chat_url_token(user=request.user, session_key=session.key)
        path = reverse("api-chat-signed", kwargs={"token": token})
        expires = timezone.now() + timedelta(seconds=settings.GLOVE_CHAT_URL_TTL_SECONDS)
        return Response(
            {
                "url": request.build_absolute_uri(path),
                "path": path,
                "expiresAt": iso_format(expires),
            }
        )


CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Accept, Idempotency-Key",
    "Access-Control-Max-Age": "600",
}


class SignedChatApi(ChatApi):
    """`POST /api/chat/<signed>`: the chat endpoint, authenticated by its URL."""

    authentication_classes = [ChatUrlAuthentication]
    permission_classes = [ChatUrlPermission]

    def get_throttles(self):
        # A CORS preflight is not a model call.
        return [] if self.request.method == "OPTIONS" else super().get_throttles()

    def options(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        return HttpResponse(status=204)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    @extend_schema(
        operation_id="chat_signed",
        parameters=[
            IDEMPOTENCY_KEY_PARAMETER,
            OpenApiParameter(
                "token",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                description="The signed credential `POST /api/sessions/<id>/chat-url` handed "
                "out: the URL itself authenticates the call (no header, no cookie).",
            ),
        ],
        request=ChatApi.InputSerializer,
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The same frames as `POST /api/chat`."
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
            503: ErrorSerializer,
        },
    )
    def post(self, request: Request, token: str) -> Any:  # type: ignore[override]
        return super().post(request)
