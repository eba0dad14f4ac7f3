"""The account's API tokens page, `/accounts/tokens/`: the owner lists and revokes them.

An edge over DRF's `authtoken` (one token per user). A token is named on the page by a
digest of its key, never by the key: the page shows only its first characters, so a page
left open or a screenshot gives nothing away. Revoking is a POST (CSRF-checked) and takes
effect at once in this process (the token cache forgets it) and within
`GLOVE_TOKEN_CACHE_SECONDS` in the others.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from rest_framework.authtoken.models import Token


def token_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _tokens(user: Any) -> list[dict]:
    return [
        {"id": token_id(token.key), "prefix": token.key[:6], "created": token.created}
        for token in Token.objects.filter(user=user)
    ]


@login_required
@require_GET
def api_tokens(request: HttpRequest) -> HttpResponse:
    return render(request, "account/tokens.html", {"tokens": _tokens(request.user)})


@login_required
@require_POST
def api_token_revoke(request: HttpRequest) -> HttpResponse:
    wanted = request.POST.get("token", "")
    revoked = 0
    for token in Token.objects.filter(user=request.user):
        if hmac.compare_digest(token_id(token.key), wanted):
            token.delete()  # its post_delete signal drops it from the token cache
            revoked += 1
    if revoked:
        messages.success(request, "The token was revoked: it no longer opens the API.")
    else:
        messages.error(request, "No such token of yours (already revoked?).")
    return HttpResponseRedirect(reverse("api-tokens"), status=303)
