"""The REST edge's shared pieces: the JSON-only base view, 404/409 answers, refused input.

Who may touch which session is `gloveapp.conversations.access` (re-exported here): a REST
caller sees only the sessions it owns, by the ids it chose (ids are per owner; the views pass
the session's global id, which that lookup returns, to the services).

Another user's session answers exactly like one that does not exist (404), so ids do not
leak; and a GET never creates a session (Glove's coffee routes did, spec Decision 6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.serializers import BaseSerializer
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from gloveapp.api.common import rendering
from gloveapp.api.common.auth import SameOriginJsonSessionAuthentication
from gloveapp.api.common.errors import exception_handler
from gloveapp.api.common.fields import validated
from gloveapp.api.common.parsers import SafeJSONParser
from gloveapp.api.common.token_auth import CachedTokenAuthentication
from gloveapp.conversations.access import owned_session, owned_session_id, write_as_owner
from gloveapp.conversations.services import DuplicateSession
from gloveapp.core.store import StoreError

__all__ = ["owned_session", "owned_session_id"]  # the one access rule, for the views


OK = b'{"ok":true}'


class ApiView(APIView):
    """The remote store speaks JSON only, like Glove's routes (no form or multipart bodies).

    Who may call, how bodies are read and answers written, and how errors look are declared
    here rather than taken from the project's REST_FRAMEWORK setting: the API answers the
    same in any project that includes it (docs/howto/existing-project.md). What DRF lacks or
    repeats at a cost the hot routes notice is `gloveapp.api.common.rendering`.
    """

    authentication_classes = [CachedTokenAuthentication, SameOriginJsonSessionAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [SafeJSONParser]
    renderer_classes = [rendering.StoredJSONRenderer, BrowsableAPIRenderer]
    content_negotiation_class = rendering.RememberedContentNegotiation

    def get_exception_handler(self) -> Any:
        return exception_handler

    @staticmethod
    def validated(serializer_class: type[BaseSerializer], data: Any) -> Any:
        """The route's input (or query) checked by its serializer: its validated data, or a
        400 naming the first bad field."""
        return validated(serializer_class, data)

    @staticmethod
    def write(
        request: Request,
        session_id: str,
        write: Callable[[str], Any],
        *,
        remembered: bool = False,
        status: int = 200,
    ) -> HttpResponse:
        """A write of the remote store: `write(global id)` on the caller's session
        (`write_as_owner`: created by its first write, 404 for anyone else's), a service's
        refusal a 400, and `{"ok": true}`."""
        with refused_input_as_400():
            write_as_owner(request.user, session_id, write, remembered=remembered)
        return rendering.json_text_response(request, OK, status=status)


class ChatRateThrottle(ScopedRateThrottle):
    """The `chat` scope's rate from REST_FRAMEWORK when the project names one, else
    GLOVE_CHAT_RATE."""

    def get_rate(self) -> str | None:
        return self.THROTTLE_RATES.get(self.scope) or settings.GLOVE_CHAT_RATE


class Conflict(APIException):
    """409: the request is well formed but contradicts the stored state."""

    status_code = 409
    default_detail = "Conflict."
    default_code = "conflict"

    def __init__(self, message: str, **extra: Any) -> None:
        # A dict detail passes through gloveapp.api.common.errors untouched, so clients (the
        # RemoteStore) can rebuild the runtime exception from `code` and the extra fields.
        super().__init__({"error": message, **extra})


class NotFound(APIException):
    status_code = 404
    default_detail = "Not found."
    default_code = "not_found"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__({"error": message, **extra})


class _RefusedInputAs400:
    """Services raise ValueError for input they refuse (before writing anything).

    The serializers already check shape, so this is the backstop that keeps a rule only a
    service knows (a column width, a NUL deep in JSON) a 400 instead of a 500. The named
    refusals (duplicates, transitions) are ValueErrors too; they pass through to the view,
    which answers them with a 404 or 409. (A class, not a generator: it is on every write.)
    """

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> bool:
        if exc is None or not isinstance(exc, ValueError):
            return False
        if isinstance(exc, (StoreError, DuplicateSession)):
            return False
        raise ValidationError(str(exc)) from None


_REFUSED_INPUT_AS_400 = _RefusedInputAs400()  # holds no state: one for every request


def refused_input_as_400() -> _RefusedInputAs400:
    """A context: a service's ValueError becomes DRF's 400 naming it."""
    return _REFUSED_INPUT_AS_400
