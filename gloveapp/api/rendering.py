"""How the REST views answer, at the cost of the answer and not of the machinery (issue 24).

DRF stays the face of the remote store (OpenAPI, the browsable API, one error shape); what a
hot route paid for it beyond its query was measured (cProfile, CPU time) and is cut here,
without a second copy of any of its rules:

- content negotiation (parsing and ordering the Accept header for every request) is
  DRF's own `DefaultContentNegotiation`, remembered per distinct (renderers, Accept,
  `?format=`, suffix): one negotiation per header a process sees, not one per request;
- a body the database already holds as JSON text (a history's stored wire texts) goes out
  as those bytes (`JSONText`), unless the client asked for indentation or the browsable page;
- a route's input serializer (its one validation schema, which the OpenAPI description
  reads too) is built once per thread and reused: DRF deep-copies a serializer's whole field
  tree on every instantiation, which cost more than the validation itself.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.serializers import BaseSerializer

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
            if self.get_indent(accepted_media_type, renderer_context or {}) is None:
                return data.body
            data = json.loads(data.body)
        return super().render(data, accepted_media_type, renderer_context)


class RememberedContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, its answer remembered per Accept header (refusals are not)."""

    _answers: dict[tuple, tuple[int, str]] = {}

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None):
        plain = request._request
        key = (
            tuple(map(type, renderers)),
            plain.META.get("HTTP_ACCEPT"),
            plain.GET.get(self.settings.URL_FORMAT_OVERRIDE) if plain.GET else None,
            format_suffix,
        )
        answer = self._answers.get(key)
        if answer is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            if len(self._answers) >= MAX_REMEMBERED:
                self._answers.clear()
            answer = self._answers[key] = (renderers.index(renderer), media_type)
        return renderers[answer[0]], answer[1]


_serializers = threading.local()


def validated(serializer_class: type[BaseSerializer], data: Any) -> Any:
    """`serializer_class(data=data)`'s validated data, or DRF's ValidationError (a 400).

    The serializer is this thread's instance of the class, its fields built once; each call
    gives it fresh data and forgets the last call's results. Only for serializers without
    context or instance (the views' input and query serializers)."""
    cache = getattr(_serializers, "by_class", None)
    if cache is None:
        cache = _serializers.by_class = {}
    serializer = cache.get(serializer_class)
    if serializer is None:
        serializer = cache[serializer_class] = serializer_class()
    for name in ("_validated_data", "_errors", "_data"):
        serializer.__dict__.pop(name, None)
    serializer.initial_data = data
    try:
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
    finally:
        del serializer.initial_data  # the request's data is not kept past the request
