"""`python manage.py create_api_token USER`: print a DRF token for the REST remote store.

The same token is printed on every run (one token per user, as DRF's authtoken keeps it),
so scripts can call this idempotently; `--rotate` replaces it. `--webhook URL` gives the
token's turns a completion webhook by default.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import URLValidator
from django.db import transaction
from rest_framework.authtoken.models import Token

from gloveapp.api.models import TokenWebhook


class Command(BaseCommand):
    help = "Print the API token of USER (creating it if needed), for `Authorization: Token ...`."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--create-user",
            action="store_true",
            help="Create the user (with an unusable password) if it does not exist.",
        )
        parser.add_argument(
            "--rotate", action="store_true", help="Replace the existing token with a new one."
        )
        parser.add_argument(
            "--webhook",
            help="An http(s) URL every turn started with this token tells when it ends (a "
            "signed POST), unless the start names its own; an empty value removes it.",
        )

    def handle(
        self,
        *args: Any,
        username: str,
        create_user: bool,
        rotate: bool,
        webhook: str | None = None,
        **options: Any,
    ):
        User = get_user_model()
        with transaction.atomic():
            try:
                user = User.objects.get(**{User.USERNAME_FIELD: username})
            except User.DoesNotExist:
                if not create_user:
                    raise CommandError(
                        f'No user "{username}". Create it first, or pass --create-user.'
                    ) from None
                user = User.objects.create_user(**{User.USERNAME_FIELD: username})
                user.set_unusable_password()
                user.save(update_fields=["password"])
            if rotate:
                Token.objects.filter(user=user).delete()
            token, _ = Token.objects.get_or_create(user=user)
            if webhook is not None:
                _set_webhook(token, webhook)
        self.stdout.write(token.key)


def _set_webhook(token: Token, url: str) -> None:
    if not url:
        TokenWebhook.objects.filter(token=token).delete()
        return
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise CommandError(f"--webhook: not an http(s) URL: {url!r}") from None
    TokenWebhook.objects.update_or_create(token=token, defaults={"url": url})
