"""System checks for deployment settings (ids glove.W0xx), in the manner of healthchecks."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Warning, register


@register("security", deploy=True)
def check_secret_key(app_configs, **kwargs):
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY and not settings.DEBUG:
        return [
            Warning(
                "SECRET_KEY is the development default while DEBUG is off.",
                hint="Set the SECRET_KEY environment variable to a long random value.",
                id="glove.W001",
            )
        ]
    return []


@register()
def check_webhook_secret(app_configs, **kwargs):
    secret = settings.GLOVE_WEBHOOK_SECRET
    if secret and len(secret) < 16:
        return [
            Warning(
                "GLOVE_WEBHOOK_SECRET is shorter than 16 characters.",
                hint="Use a long random secret; signatures are only as strong as it is.",
                id="glove.W002",
            )
        ]
    return []
