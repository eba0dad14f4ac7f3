"""System checks for deployment settings (ids glove.W0xx), in the manner of healthchecks."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning, register

from gloveapp import conf


@register("security", deploy=True)
def check_secret_key(app_configs, **kwargs):
    if settings.SECRET_KEY == conf.SETTINGS["SECRET_KEY"].default and not settings.DEBUG:
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


@register()
def check_webhook_secrets_apart(app_configs, **kwargs):
    # What we sign (approval notifications to chat tools) and what we accept (signed
    # decisions and resolutions) must use different keys: every receiver of a notification
    # holds the signing key, and with one key for both it could sign a decision we accept.
    accepted = settings.GLOVE_WEBHOOK_SECRET
    signing = settings.GLOVE_APPROVAL_WEBHOOK_SECRET
    errors = []
    if accepted and signing and accepted == signing:
        errors.append(
            Error(
                "GLOVE_APPROVAL_WEBHOOK_SECRET (signs what the server sends) equals "
                "GLOVE_WEBHOOK_SECRET (accepts signed requests).",
                hint="Give the outgoing approval webhooks a secret of their own.",
                id="glove.E020",
            )
        )
    turn_signing = settings.GLOVE_TURN_WEBHOOK_SECRET
    if accepted and turn_signing and accepted == turn_signing:
        errors.append(
            Error(
                "GLOVE_TURN_WEBHOOK_SECRET (signs the turns' completion webhooks) equals "
                "GLOVE_WEBHOOK_SECRET (accepts signed requests).",
                hint="Give the completion webhooks a secret of their own.",
                id="glove.E022",
            )
        )
    if settings.GLOVE_APPROVAL_WEBHOOKS and not signing:
        errors.append(
            Warning(
                "GLOVE_APPROVAL_WEBHOOKS is set but GLOVE_APPROVAL_WEBHOOK_SECRET is not: "
                "approval webhooks are not sent.",
                hint="Set GLOVE_APPROVAL_WEBHOOK_SECRET (not the same as GLOVE_WEBHOOK_SECRET).",
                id="glove.W020",
            )
        )
    return errors


def leaky_connection_settings() -> list[str]:
    """Aliases whose persistent connections would leak in this process, if any: everywhere
    but under a WSGI server whose threads live as long as the process (gunicorn)."""
    if settings.GLOVE_SERVER == "wsgi":
        return []
    return [
        alias
        for alias, database in settings.DATABASES.items()
        # None means "keep forever", which leaks as surely as any positive age.
        if database.get("CONN_MAX_AGE", 0) is None or database.get("CONN_MAX_AGE", 0) > 0
    ]


@register("glove")
def check_conn_max_age(app_configs, **kwargs):
    # A persistent connection belongs to its thread. Under ASGI each request's sync code may
    # run on a thread of its own (every request would open one and never close it, until
    # the database refuses new connections); granian's threads exit when idle, leaving
    # theirs open.
    return [
        Error(
            f"DATABASES[{alias!r}] keeps connections (DB_CONN_MAX_AGE > 0) under "
            f"{settings.GLOVE_SERVER}, where threads do not live as long as the process.",
            hint=(
                "Use DB_CONN_MAX_AGE=0 (PostgreSQL connections then come from psycopg's "
                "pool, DB_POOL_SIZE); persistent connections are for gunicorn "
                "(gloveapp.wsgi, GLOVE_SERVER=wsgi)."
            ),
            id="glove.E006",
        )
        for alias in leaky_connection_settings()
    ]


@register()
def check_model_prices(app_configs, **kwargs):
    from gloveapp.observe.cost import parse_prices

    try:
        parse_prices(settings.GLOVE_MODEL_PRICES)
    except ValueError as error:
        return [
            Error(
                f"GLOVE_MODEL_PRICES is not a price table: {error}.",
                hint='Map each model to {"input": ..., "output": ..., "cache_read": ..., '
                '"cache_write": ...} in US dollars per million tokens.',
                id="glove.E021",
            )
        ]
    return []


@register()
def check_metrics_token(app_configs, **kwargs):
    token = settings.GLOVE_METRICS_TOKEN
    if token and len(token) < 16:
        return [
            Warning(
                "GLOVE_METRICS_TOKEN is shorter than 16 characters.",
                hint="Use a long random token; it is all that keeps /metrics private.",
                id="glove.W021",
            )
        ]
    return []
