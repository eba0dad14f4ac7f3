"""Error pages that always finish: a request ends with a response whatever its error held.

Django turns an exception into its error page (DEBUG's technical page, or handler500) inside
the handler. When building that page fails too, the failure goes up through every
middleware's conversion and out of the handler: no response is ever made, so none is closed,
`request_finished` never fires and the request's pooled connection is never given back.
A lone surrogate in an error's message or in a frame's locals did exactly that to DEBUG's
page (its HTML cannot be encoded): after as many such requests as the pool holds, every
database request of the process waited out the pool's timeout.

- `EncodableExceptionReporter` (DEFAULT_EXCEPTION_REPORTER) writes what no encoding takes
  as backslash escapes, so the technical page and the error e-mails always encode.
- `LastResortMiddleware`, the outermost, answers a bare 500 for anything that still gets
  out of Django's own conversion (a broken error page, handler500 failing), so the response
  is closed and the connection released like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.views.debug import ExceptionReporter

logger = logging.getLogger("django.request")

BARE_500 = b"A server error occurred; it has been logged."


def encodable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (lone surrogates) as backslash escapes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


class EncodableExceptionReporter(ExceptionReporter):
    """Django's reporter, its page and its text always encodable."""

    def get_traceback_html(self) -> str:
        return encodable(super().get_traceback_html())

    def get_traceback_text(self) -> str:
        return encodable(super().get_traceback_text())


def bare_500() -> HttpResponse:
    return HttpResponse(BARE_500, status=500, content_type="text/plain; charset=utf-8")


class LastResortMiddleware:
    """Outermost: whatever escapes Django's exception handling becomes a bare 500."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        try:
            return self.get_response(request)
        except Exception as exc:
            return _answered(request, exc)

    async def _acall(self, request: HttpRequest) -> Any:
        try:
            return await self.get_response(request)
        except Exception as exc:
            return _answered(request, exc)


def _answered(request: HttpRequest, exc: Exception) -> HttpResponse:
    try:
        logger.error(
            "The error page of %s failed: %s",
            encodable(request.path),
            encodable(repr(exc)),
            exc_info=exc,
        )
    except Exception:
        pass
    return bare_500()
