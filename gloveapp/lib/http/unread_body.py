"""A request body the application did not read does not spoil the keep-alive connection.

Answering before reading the body is right for a refused request (a 413 for a body past
DATA_UPLOAD_MAX_MEMORY_SIZE, a 401, a 404), but the unread bytes are still on the connection:
some servers then drop it (granian did, without saying so), so the client's NEXT request on
that connection fails. Here, when the response starts, what the application left unread is
read and discarded (up to `DRAIN_LIMIT` bytes: the client has usually sent it already); a
larger rest gets `Connection: close` instead, so the client opens a new connection rather
than writing into a closed one. Neither Django's WSGI handler nor granian does this
(tests/serving/test_unread_body_wsgi.py, and on granian tests/serving/test_unread_body.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

DRAIN_LIMIT = 16 * 1024 * 1024
_CHUNK = 64 * 1024


class _CountingInput:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.consumed = 0

    def read(self, *args: Any) -> bytes:
        data = self._stream.read(*args)
        self.consumed += len(data)
        return data

    def readline(self, *args: Any) -> bytes:
        line = self._stream.readline(*args)
        self.consumed += len(line)
        return line

    def readlines(self, *args: Any) -> list[bytes]:
        lines = self._stream.readlines(*args)
        self.consumed += sum(len(line) for line in lines)
        return lines

    def __iter__(self) -> Any:
        for line in self._stream:
            self.consumed += len(line)
            yield line


def _declared_length(meta: dict[str, Any]) -> int:
    try:
        return max(0, int(meta.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def drain_unread_bodies(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """Wrap a WSGI application (see the module's docstring)."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = _declared_length(environ)
        if not length or "wsgi.input" not in environ:
            return app(environ, start_response)
        counting = _CountingInput(environ["wsgi.input"])
        environ["wsgi.input"] = counting

        def starting(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            left = length - counting.consumed
            if 0 < left <= DRAIN_LIMIT:
                try:
                    while counting.consumed < length:
                        if not counting.read(min(_CHUNK, length - counting.consumed)):
                            break
                except OSError:
                    pass  # the client went away: nothing to keep alive
                left = length - counting.consumed
            if left > 0 and not any(name.lower() == "connection" for name, _ in headers):
                headers = [*headers, ("Connection", "close")]
            return start_response(status, headers, *exc_info)

        return app(environ, starting)

    return wrapped
