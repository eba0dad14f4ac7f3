"""The API tokens a user holds, named by a digest of their key and never by the key: a page
left open or a screenshot gives nothing away."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from rest_framework.authtoken.models import Token


def api_token_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def api_tokens_of(user: Any) -> list[dict]:
    return [
        {"id": api_token_id(token.key), "prefix": token.key[:6], "created": token.created}
        for token in Token.objects.filter(user=user)
    ]


def api_token_revoke(*, user: Any, token_id: str) -> bool:
    """Delete the user's token with this id; whether there was one. The token's post_delete
    signal (gloveapp.api.token_auth) drops it from the token cache."""
    revoked = False
    for token in Token.objects.filter(user=user):
        if hmac.compare_digest(api_token_id(token.key), token_id):
            token.delete()
            revoked = True
    return revoked
