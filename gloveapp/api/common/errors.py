"""One error shape for the JSON API: `{"error": "...", "field": "..."}`.

DRF's default answers validation errors with a dict of field lists; clients written for
Glove's Next.js routes expect `{error}`. We keep DRF's detail under `details` as well.
"""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import NoReverseMatch, reverse
from django.views import defaults
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from gloveapp.conversations.services import SessionGone
from gloveapp.lib.db.outages import (
    close_broken_connections,
    is_database_outage,
    is_transaction_conflict,
)


def _first_error(detail: Any, prefix: str = "") -> tuple[str, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            if isinstance(key, int):  # DRF keys a list's item errors by index
                name = f"{prefix}[{key}]"
            if key == "non_field_errors":
                name = prefix
            return _first_error(value, name)
    if isinstance(detail, list) and detail:
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                if not value:  # a valid item of a `many=True` list
                    continue
                return _first_error(value, f"{prefix}[{index}]" if prefix else str(index))
            return prefix, str(value)
    return prefix, str(detail)


def _encodable(detail: Any) -> Any:
    """The error detail with every lone surrogate escaped (`\\ud800`): error messages echo
    the input ("got \"...\""), and the JSON renderer cannot encode a lone surrogate."""
    if isinstance(detail, str):
        escaped = detail.encode("utf-8", "backslashreplace").decode("utf-8")
        # Keep DRF's ErrorDetail (its code) when nothing needed escaping.
        return detail if escaped == detail else escaped
    if isinstance(detail, dict):
        return {_encodable(key): _encodable(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_encodable(value) for value in detail]
    return detail


def _too_large() -> dict[str, Any]:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {"error": f"The request body is larger than the {limit:,} bytes allowed.", "field": None}


def exception_handler(exc: Exception, context: dict[str, Any]):
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer is an HTML 400 page (a debug page under DEBUG).
        return Response(_too_large(), status=413)
    if isinstance(exc, SessionGone):
        # Deleted between the route's ownership check and its write: it is gone now.
        return Response({"error": "Session not found."}, status=404)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    response.data = _encodable(response.data)
    if isinstance(exc, ValidationError):
        field, message = _first_error(response.data)
        text = f"{field}: {message}" if field else message
        response.data = {"error": text, "field": field or None, "details": response.data}
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"error": str(response.data["detail"])}
        # A budget's refusal (a 429) names the budget, as its Retry-After says its window.
        if isinstance(getattr(exc, "budget", None), str):
            response.data["budget"] = exc.budget
    return response


def _api_prefix() -> str | None:
    """Where the project mounted `gloveapp.api.urls` ("/api/" here; anything in another
    project), or None when it did not."""
    try:
        return reverse("api-sessions").removesuffix("sessions")
    except NoReverseMatch:
        return None


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The project's handler400: JSON for the API, Django's page for everything else."""
    prefix = _api_prefix()
    if prefix is None or not request.path.startswith(prefix):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(_too_large(), status=413)
    return JsonResponse({"error": "Bad request.", "field": None}, status=400)


# Seconds a client is asked to wait when the database is away (Retry-After).
DATABASE_AWAY_RETRY_AFTER = 2


def server_error(request: HttpRequest) -> HttpResponse:
    """The project's handler500. A database that is away (restarting, failing over: the
    connection refused or cut) is a 503 with Retry-After, which clients and proxies retry,
    not a crash: nothing was done (`is_database_outage`: any error a cut connection raises
    through psycopg; a deadlock too, said as such). Anything else is Django's 500."""
    error = sys.exception()  # handler500 runs inside Django's `except` for the error
    if is_database_outage(error):
        # Whatever a cut connection raised through psycopg (PgBouncer's "received 2 results
        # from command 'BEGIN'" included): that connection is not used again.
        close_broken_connections()
        prefix = _api_prefix()
        text = "The database is unavailable for a moment; nothing was done. Try again."
        if is_transaction_conflict(error):
            text = "A concurrent change conflicted with this one; nothing was done. Try again."
        if prefix is not None and request.path.startswith(prefix):
            response = JsonResponse({"error": text, "field": None}, status=503)
        else:
            response = HttpResponse(text, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(DATABASE_AWAY_RETRY_AFTER)
        return response
    return defaults.server_error(request)
