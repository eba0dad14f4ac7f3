"""What the API keeps of its own: the completion webhook a token's turns tell by default."""

from __future__ import annotations

from django.db import models
from rest_framework.authtoken.models import Token


class TokenWebhook(models.Model):
    """Every turn started with this token (over REST or A2A) tells `url` when it ends,
    unless the start names a webhook of its own (`create_api_token --webhook`). Goes with
    its token (a rotated token has none)."""

    token = models.OneToOneField(
        Token, on_delete=models.CASCADE, primary_key=True, related_name="webhook"
    )
    url = models.URLField(max_length=2000)

    def __str__(self) -> str:
        return f"webhook of {self.token_id}"
