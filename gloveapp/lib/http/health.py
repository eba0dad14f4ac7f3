"""`GET /healthz`: the server answers, without touching the database.

For a proxy's or orchestrator's health probe; bench/rest.py also loads it as the floor of
what Django itself costs per request (full middleware, static JSON) on the same server.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
