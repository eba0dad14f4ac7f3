"""Session authentication for the JSON API that lets same-origin `fetch` skip the CSRF token.

glove-react's endpoint model and the coffee example's `RemoteStoreActions` send a plain
`fetch` with `Content-Type: application/json` and the session cookie, and have no way to add
a CSRF header. Such a request is safe without a token when both hold:

- its `Content-Type` is `application/json`: a cross-site page cannot send that without a
  CORS preflight (it is not a "simple" content type), and this server answers no
  preflight; HTML forms cannot send it at all;
- its `Origin` is this site's own origin (scheme and host of the request), or, when a
  browser sent no `Origin`, its `Sec-Fetch-Site` is `same-origin`.

Anything else (a form or `text/plain` body, a foreign or `null` Origin, neither header)
goes through Django's CSRF check as before. Token-authenticated clients never reach this
class (TokenAuthentication answers first and has no CSRF check).
"""

from __future__ import annotations

from django.core.exceptions import DisallowedHost
from drf_spectacular.authentication import SessionScheme
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request

from inbox.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookSignatureAuthentication


def is_same_origin_json(request: Request) -> bool:
    """True for a JSON request a browser could only have sent from this site."""
    content_type = request.META.get("CONTENT_TYPE", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        return False
    origin = request.META.get("HTTP_ORIGIN")
    if origin is None:
        return request.META.get("HTTP_SEC_FETCH_SITE", "").lower() == "same-origin"
    try:
        own = f"{request.scheme}://{request.get_host()}"
    except DisallowedHost:
        return False
    return origin.lower() == own.lower()


class SameOriginJsonSessionAuthentication(SessionAuthentication):
    """DRF's SessionAuthentication, minus the CSRF token for same-origin JSON requests."""

    def enforce_csrf(self, request: Request) -> None:
        if is_same_origin_json(request):
            return
        super().enforce_csrf(request)


class SameOriginJsonSessionScheme(SessionScheme):
    """The OpenAPI schema still describes it as cookie authentication."""

    target_class = SameOriginJsonSessionAuthentication
    name = "sessionCookie"


class WebhookSignatureScheme(OpenApiAuthenticationExtension):
    """The signed webhook (inbox.webhooks), as OpenAPI describes it. Here, on the edge that
    serves the schema: registered from the inbox app's ready(), it imported drf-spectacular
    (a quarter of a second) into every process, those that load no URLconf too."""

    target_class = WebhookSignatureAuthentication
    name = "gloveSignature"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": SIGNATURE_HEADER,
            "description": (
                f"`sha256=<hex HMAC-SHA256(GLOVE_WEBHOOK_SECRET, {TIMESTAMP_HEADER} + '.' + "
                f"raw body)>`, with `{TIMESTAMP_HEADER}: <unix seconds>`."
            ),
        }
