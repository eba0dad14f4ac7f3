"""The `Idempotency-Key` header on the API's writes (`gloveapp.conversations.idempotency`).

A retried request with the key of an acknowledged one gets the first answer back (with the
header `Idempotent-Replayed: true`) and writes nothing; the key reused for another request is
a 422; a duplicate of a streamed answer still under way is a 409 (retry shortly).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request

from gloveapp.conversations import idempotency

REPLAYED_HEADER = "Idempotent-Replayed"
_KEY_META = "HTTP_" + idempotency.KEY_HEADER.upper().replace("-", "_")

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    idempotency.KEY_HEADER,
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "A key of the client's choosing for this write (e.g. a UUID per message; 1-200 "
        "printable ASCII characters, unique per user). A retry with the same key gets the "
        "first answer back (with `Idempotent-Replayed: true`) and stores nothing new; the "
        "same key with a different request is a 422."
    ),
)


class IdempotencyKeyReusedError(APIException):
    status_code = 422
    default_code = "idempotency_key_reused"


class IdempotentRequestInProgressError(APIException):
    status_code = 409
    default_code = "idempotent_request_in_progress"


def request_key(request: Request) -> str | None:
    """The request's key, or None without the header; a malformed key is a 400."""
    # From META: `request.headers` would build a map of every header for this one.
    key = request.META.get(_KEY_META)
    if key is None:
        return None
    try:
        return idempotency.check_key(key)
    except idempotency.IdempotencyKeyInvalid as exc:
        raise ValidationError({idempotency.KEY_HEADER: [str(exc)]}) from None


@contextmanager
def idempotency_errors() -> Iterator[None]:
    try:
        yield
    except idempotency.IdempotencyKeyReused as exc:
        raise IdempotencyKeyReusedError(str(exc)) from None
    except idempotency.IdempotentRequestInProgress as exc:
        raise IdempotentRequestInProgressError(str(exc)) from None
