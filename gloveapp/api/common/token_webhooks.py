"""The webhook a turn tells when it ends: the one its start names, else its token's."""

from __future__ import annotations

from typing import Any

from gloveapp.api.models import TokenWebhook


def turn_webhook_url(named: str | None, token: Any) -> str | None:
    """`named` (the start's own `webhook`), else the default of the token the caller used
    (`create_api_token --webhook`), else None. A session cookie has no token: None."""
    if named:
        return named
    key = getattr(token, "key", None)
    if not key:
        return None
    return TokenWebhook.objects.filter(token_id=key).values_list("url", flat=True).first()
