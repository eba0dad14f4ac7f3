"""The account's API tokens page, `/accounts/tokens/`: the owner creates, lists and revokes
them. A new token's key is shown once, in the answer to the POST that made it (never stored
in the session or a message, never cacheable).

An edge over `gloveapp.conversations.credentials`. Revoking is a POST (CSRF-checked) and
takes effect at once in this process (the token cache forgets it) and within
`GLOVE_TOKEN_CACHE_SECONDS` in the others.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from gloveapp.conversations import credentials


@login_required
@require_GET
def api_tokens(request: HttpRequest) -> HttpResponse:
    tokens = credentials.api_tokens_of(request.user)
    return render(request, "account/tokens.html", {"tokens": tokens})


@login_required
@require_POST
@never_cache
def api_token_create(request: HttpRequest) -> HttpResponse:
    replaced = bool(credentials.api_tokens_of(request.user))
    key = credentials.api_token_create(user=request.user)
    return render(
        request,
        "account/tokens.html",
        {"tokens": credentials.api_tokens_of(request.user), "new_key": key, "replaced": replaced},
    )


@login_required
@require_POST
def api_token_revoke(request: HttpRequest) -> HttpResponse:
    revoked = credentials.api_token_revoke(user=request.user, token=request.POST.get("token", ""))
    if revoked:
        messages.success(request, "The token was revoked: it no longer opens the API.")
    else:
        messages.error(request, "No such token of yours (already revoked?).")
    return HttpResponseRedirect(reverse("api-tokens"), status=303)
