"""A user's API credentials (DRF's `authtoken`, one token per user): listed and revoked by
their owner (the `/accounts/tokens/` page). A token is named by a digest of its key, never
by the key, so a page or a form carries nothing that opens the API."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from rest_framework.authtoken.models import Token


@dataclass(frozen=True)
class TokenListing:
    id: str  # a digest of the key
    prefix: str  # its first characters, to tell tokens apart
    created: datetime


def token_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def api_tokens_of(user: Any) -> list[TokenListing]:
    return [
        TokenListing(id=token_id(token.key), prefix=token.key[:6], created=token.created)
        for token in Token.objects.filter(user=user)
    ]


def api_token_revoke(*, user: Any, token: str) -> int:
    """Delete the user's token whose digest is `token`; how many went (0 or 1). Its
    post_delete signal drops it from this process's token cache at once."""
    revoked = 0
    with transaction.atomic():
        for candidate in Token.objects.filter(user=user):
            if hmac.compare_digest(token_id(candidate.key), token):
                candidate.delete()
                revoked += 1
    return revoked


def api_token_create(*, user: Any) -> str:
    """A new token for `user`, replacing the one they had (one per user, as DRF keeps it;
    the old one's post_delete signal drops it from the token cache). Returns the key: the
    only time it is shown, the page never lists it again."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user).key
