"""Who may touch which session: a caller sees only the sessions it owns.

Another user's session answers exactly like one that does not exist (404), so ids do not
leak; and a GET never creates a session (Glove's coffee routes did, spec Decision 6).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.http import Http404
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.views import APIView

from gloveapp.api_parsers import SafeJSONParser
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import DuplicateSession
from gloveapp.core.store import StoreError


class ApiView(APIView):
    """The remote store speaks JSON only, like Glove's routes (no form or multipart bodies)."""

    parser_classes = [SafeJSONParser]


def owned_session(user: Any, session_id: str) -> Session:
    # A NUL in the path would reach the database driver, which refuses it with a 500.
    if "\x00" in session_id or len(session_id) > 128:
        raise Http404("Session not found.")
    try:
        return Session.objects.get(pk=session_id, owner=user)
    except Session.DoesNotExist:
        raise Http404("Session not found.") from None


def owned_session_exists(user: Any, session_id: str) -> None:
    """The same check as `owned_session` when the view needs only the id (one cheap query)."""
    if (
        "\x00" in session_id
        or len(session_id) > 128
        or not Session.objects.filter(pk=session_id, owner=user).exists()
    ):
        raise Http404("Session not found.")


class Conflict(APIException):
    """409: the request is well formed but contradicts the stored state."""

    status_code = 409
    default_detail = "Conflict."
    default_code = "conflict"

    def __init__(self, message: str, **extra: Any) -> None:
        # A dict detail passes through gloveapp.api_errors untouched, so clients (the
        # RemoteStore) can rebuild the runtime exception from `code` and the extra fields.
        super().__init__({"error": message, **extra})


class NotFound(APIException):
    status_code = 404
    default_detail = "Not found."
    default_code = "not_found"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__({"error": message, **extra})


@contextmanager
def refused_input_as_400() -> Iterator[None]:
    """Services raise ValueError for input they refuse (before writing anything).

    The serializers already check shape, so this is the backstop that keeps a rule only a
    service knows (a column width, a NUL deep in JSON) a 400 instead of a 500. The named
    refusals (duplicates, transitions) are ValueErrors too; they pass through to the view,
    which answers them with a 404 or 409.
    """
    try:
        yield
    except (StoreError, DuplicateSession):
        raise
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
