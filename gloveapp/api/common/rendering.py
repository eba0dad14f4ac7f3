"""How the REST views answer: DRF's renderer and negotiation, with what DRF lacks or
repeats at a cost the hot routes notice (bench/README.md), each pinned to DRF's own answer
by tests/api/test_drf_exceptions.py.

- A body that is JSON text already (a history's stored wire texts, `{"ok": true}`) goes out
  as those bytes (`StoredJSONRenderer`, DRF's JSONRenderer: DRF's own would decode and
  re-encode it), unless indentation or the browsable page was asked; when it goes out
  unchanged, without building the template response DRF's `Response` is
  (`json_text_response`); a history longer than one part is streamed (DRF has none).
- DRF's content negotiation, its answer remembered per distinct (renderers, Accept,
  `?format=`, suffix) and the parser per Content-Type: DRF parses and orders the Accept
  header anew for every request, a tenth of a GET's time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

MAX_REMEMBERED = 512  # distinct Accept headers; a flood of odd ones cannot grow the process


class JSONText:
    """A response body that is JSON text already (the renderer sends it as it is)."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class StoredJSONRenderer(JSONRenderer):
    """DRF's JSON renderer; a `JSONText` goes out unchanged unless indentation was asked."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context=None):
        if isinstance(data, JSONText):
            if self.get_indent(accepted_media_type or "", renderer_context or {}) is None:
                return data.body
            data = json.loads(data.body)
        return super().render(data, accepted_media_type, renderer_context)


def json_text_response(request: Request, body: bytes, status: int = 200) -> HttpResponse:
    """The answer whose body is JSON text already: the bytes with the Content-Type DRF's
    Response gives them, when the negotiated renderer sends them unchanged; else DRF's
    Response (indented, or the browsable page)."""
    renderer = getattr(request, "accepted_renderer", None)
    if isinstance(renderer, StoredJSONRenderer) and renderer.charset is None:
        if renderer.get_indent(request.accepted_media_type, {}) is None:
            return HttpResponse(body, status=status, content_type=renderer.media_type)
    return Response(JSONText(body), status=status)


def streamed_json_response(request: Request, parts: Iterator[bytes]) -> StreamingHttpResponse:
    """The answer whose body is JSON text read a part at a time (a long history): streamed
    as it is read, so the process holds one part, whatever the body's length. Under ASGI the
    parts are read on the request's thread one at a time (Django would read a synchronous
    iterator whole before sending it). Always compact JSON: indentation and the browsable
    page would need the whole body in memory."""
    if isinstance(request._request, ASGIRequest):
        response = StreamingHttpResponse(_one_part_at_a_time(parts))
    else:
        response = StreamingHttpResponse(parts)
    response["Content-Type"] = StoredJSONRenderer.media_type
    return response


async def _one_part_at_a_time(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    # thread_sensitive: the request's own thread, which holds its database connection.
    read = sync_to_async(next, thread_sensitive=True)
    try:
        while (part := await read(parts, None)) is not None:
            yield part
    finally:
        close = getattr(parts, "close", None)
        if close is not None:  # a generator: its open query, if any, ends on its thread
            await sync_to_async(close, thread_sensitive=True)()


class RememberedContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, its answer remembered per Accept header (refusals are not), and
    the parser per Content-Type."""

    _answers: dict[tuple, tuple[int, str]] = {}
    _parsers: dict[tuple, int | None] = {}

    def select_parser(self, request: Request, parsers: list) -> Any:
        key = (tuple(map(type, parsers)), request.content_type)
        index = self._parsers.get(key, -1)
        if index == -1:
            parser = super().select_parser(request, parsers)
            if len(self._parsers) >= MAX_REMEMBERED:
                self._parsers.clear()
            index = self._parsers[key] = None if parser is None else parsers.index(parser)
        return None if index is None else parsers[index]

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None):
        plain = request._request  # DRF's documented way to the HttpRequest
        key = (
            tuple(map(type, renderers)),
            plain.META.get("HTTP_ACCEPT"),
            # No query string, no `?format=` (and no QueryDict built to find that out).
            plain.GET.get(self.settings.URL_FORMAT_OVERRIDE)
            if plain.META.get("QUERY_STRING")
            else None,
            format_suffix,
        )
        answer = self._answers.get(key)
        if answer is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            if len(self._answers) >= MAX_REMEMBERED:
                self._answers.clear()
            answer = self._answers[key] = (renderers.index(renderer), media_type)
        return renderers[answer[0]], answer[1]
