"""`python manage.py create_api_token USER`: print a DRF token for the REST remote store.

The same token is printed on every run (one token per user, as DRF's authtoken keeps it),
so scripts can call this idempotently; `--rotate` replaces it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token


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

    def handle(self, *args: Any, username: str, create_user: bool, rotate: bool, **options: Any):
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
        self.stdout.write(token.key)
