"""The signed-webhook authentication as OpenAPI describes it (drf-spectacular extension)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from inbox.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER


class WebhookSignatureScheme(OpenApiAuthenticationExtension):
    target_class = "inbox.webhooks.WebhookSignatureAuthentication"
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
