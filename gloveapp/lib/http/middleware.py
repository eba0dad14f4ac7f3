"""Django's `MessageMiddleware`, its storage (a cookie signer and the session storage
behind it, about 50 µs) built when something reads or adds a message, not for every API
call: the one behaviour Django's lacks, pinned by tests/suite/test_light_middleware.py.

And WhiteNoise's, able to run async (`WhiteNoiseMiddleware`): a sync-only middleware makes
Django run every request of the ASGI server through a thread of its own, held until the
response ends, so each open event stream (`/api/sessions/<id>/events`) kept a parked thread.

`beside_django(app)`: Django's host check, HTTPS redirect and security headers for an ASGI
app served beside Django (the event stream), by the same middleware.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.messages import middleware as messages_middleware
from django.contrib.messages.storage import default_storage
from django.contrib.staticfiles import finders
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.exception import response_for_exception
from django.http import HttpResponse
from django.middleware import csp
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.functional import SimpleLazyObject, empty
from whitenoise import middleware as whitenoise_middleware


class MessageMiddleware(messages_middleware.MessageMiddleware):
    def process_request(self, request: Any) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))

    def process_response(self, request: Any, response: Any) -> Any:
        messages = request.__dict__.get("_messages")
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response  # never read nor added to: Django's update would store nothing
        return super().process_response(request, response)


# The finders' files as WhiteNoise indexes them (a stat and a set of headers per file, some
# 240 files: 8 ms), per configuration: a handler built again in the same process (Django's
# test client builds one per client) reuses the index instead of reading every file again.
_finder_files: dict[tuple, dict[str, Any]] = {}


class WhiteNoiseMiddleware(whitenoise_middleware.WhiteNoiseMiddleware):
    """WhiteNoise's middleware, the same files and headers, also async under ASGI."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, settings: Any = settings) -> None:
        self._settings = settings
        super().__init__(get_response, settings)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def add_files_from_finders(self) -> None:
        # The finders are cached until a setting they read changes (Django clears them then).
        key = (
            tuple(finders.get_finders()),
            self.static_prefix,
            self.max_age,
            self.charset,
            self.allow_all_origins,
            self.index_file,
            self.add_headers_function,
            repr(getattr(self._settings, "WHITENOISE_MIMETYPES", None)),
            getattr(self._settings, "WHITENOISE_IMMUTABLE_FILE_TEST", None),
        )
        indexed = _finder_files.get(key)
        if indexed is None:
            before = dict(self.files)
            super().add_files_from_finders()
            indexed = _finder_files[key] = {
                url: file for url, file in self.files.items() if before.get(url) is not file
            }
        self.files.update(indexed)

    def __call__(self, request: Any) -> Any:
        if self._async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: Any) -> Any:
        if self.autorefresh:  # DEBUG: looks on disk, off the event loop
            find = sync_to_async(self.find_file, thread_sensitive=False)
            static_file = await find(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return self.serve(static_file, request)
        return await self.get_response(request)


# -- an ASGI app beside Django -----------------------------------------------------------------
# The event stream is served by an ASGI app of its own, beside Django (a Django request would
# hold a thread per open stream). It keeps Django's rules for every response by running the
# same middleware on a request built from the ASGI scope: the Host check (ALLOWED_HOSTS, a
# 400 answered by the project's handler400, logged as Django logs it), the HTTPS redirect,
# and the headers SecurityMiddleware (nosniff, Referrer-Policy, Cross-Origin-Opener-Policy,
# HSTS over HTTPS), the Content-Security-Policy and X-Frame-Options add. Nothing here reads
# the database.
def _no_view(request: Any) -> Any:  # pragma: no cover - the middleware here never calls it
    raise AssertionError("beside_django runs no view")


def _header_middleware() -> list[Any]:
    # Built per use: they read their settings when built (tests change them).
    return [
        SecurityMiddleware(_no_view),
        csp.ContentSecurityPolicyMiddleware(_no_view),
        XFrameOptionsMiddleware(_no_view),
    ]


def _refusal(request: Any) -> Any:
    """Django's answer to a request it would not serve (a bad Host, plain HTTP under
    SECURE_SSL_REDIRECT), or None."""
    try:
        request.get_host()
    except DisallowedHost as error:
        return response_for_exception(request, error)
    return SecurityMiddleware(_no_view).process_request(request)


def _security_headers(request: Any) -> list[tuple[bytes, bytes]]:
    """The headers Django's middleware adds to a response to `request` (they depend on the
    request and the settings, not on the response's status or content)."""
    response: Any = HttpResponse()
    del response["Content-Type"]
    for middleware in _header_middleware():
        response = middleware.process_response(request, response)
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.items()
    ]


async def _send_django_response(response: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in response.items()
            ],
        }
    )
    await send({"type": "http.response.body", "body": response.content})


def beside_django(app: Any) -> Any:
    """`app` (an ASGI HTTP app served beside Django) under Django's host check, HTTPS
    redirect and security headers."""

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        request = ASGIRequest(scope, BytesIO())
        refused = _refusal(request)
        if refused is not None:
            for middleware in _header_middleware():
                refused = middleware.process_response(request, refused)
            await _send_django_response(refused, send)
            return

        # Read now: an open stream keeps these few bytes, not the request.
        security = _security_headers(request)
        del request

        async def send_secured(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                own = {name.lower() for name, _ in headers}  # as Django's: the app's are kept
                headers += [(name, value) for name, value in security if name not in own]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_secured)

    return guarded
