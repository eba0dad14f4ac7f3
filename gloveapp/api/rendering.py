"""How the REST views answer, at the cost of the answer and not of the machinery (issue 24).

DRF stays the face of the remote store (OpenAPI, the browsable API, one error shape); what a
hot route paid for it beyond its query was measured (cProfile, CPU time) and is cut here,
without a second copy of any of its rules:

- content negotiation (parsing and ordering the Accept header for every request) is
  DRF's own `DefaultContentNegotiation`, remembered per distinct (renderers, Accept,
  `?format=`, suffix): one negotiation per header a process sees, not one per request; the
  parser for a request's Content-Type likewise;
- the parts of a view DRF builds anew for every request and that hold no state of the
  request (its parsers and authentication classes, its `Allow` header) are built once per
  view class (`LightAPIView`);
- a body the database already holds as JSON text (a history's stored wire texts, `{"ok":
  true}`) goes out as those bytes (`JSONText`), unless the client asked for indentation or
  the browsable page; when the negotiated renderer passes it through, without building
  DRF's `Response` for it (`json_text_response`: a template response rendered later, which
  cost more than the rest of the view);
- a route's input serializer (its one validation schema, which the OpenAPI description
  reads too) is built once per thread and reused: DRF deep-copies a serializer's whole field
  tree on every instantiation, which cost more than the validation itself;
- DRF's steps around the view method run as DRF runs them, minus their bookkeeping: the
  negotiator and permission checks built once per view class, authentication without a
  context manager per request, the `Vary` and `Allow` headers set without re-parsing a
  `Vary` header the answer does not have, `request.META` without DRF's attribute fallback.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from typing import Any

from django.http import HttpResponse, QueryDict
from django.utils.datastructures import MultiValueDict
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Empty, Request, WrappedAttributeError
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

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
            if self.passes_through(accepted_media_type, renderer_context or {}):
                return data.body
            data = json.loads(data.body)
        return super().render(data, accepted_media_type, renderer_context)

    def passes_through(self, accepted_media_type: str | None, renderer_context: dict) -> bool:
        """Whether a `JSONText` goes out unchanged: no indentation asked (DRF's get_indent,
        without parsing a media type that has no parameters)."""
        if accepted_media_type == self.media_type and renderer_context.get("indent") is None:
            return True
        return self.get_indent(accepted_media_type, renderer_context) is None

    @property
    def content_type(self) -> str:
        """The Content-Type DRF's Response sets for what this renderer wrote."""
        return f"{self.media_type}; charset={self.charset}" if self.charset else self.media_type


def json_text_response(request: Request, body: bytes, status: int = 200) -> HttpResponse:
    """The answer whose body is JSON text already: when the negotiated renderer passes it
    through, the bytes as DRF's Response would render them, without building one; else
    DRF's Response (indented, or the browsable page)."""
    renderer = getattr(request, "accepted_renderer", None)
    if isinstance(renderer, StoredJSONRenderer) and renderer.passes_through(
        request.accepted_media_type, {}
    ):
        return HttpResponse(body, status=status, content_type=renderer.content_type)
    return Response(JSONText(body), status=status)


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
        plain = request._request
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
    serializer.initial_data = data
    try:
        try:
            # What `is_valid()` runs; its bookkeeping only where it shapes the answer: a
            # refusal is validated again by `is_valid`, which words DRF's 400.
            return serializer.run_validation(data)
        except ValidationError:
            pass
        for name in ("_validated_data", "_errors", "_data"):
            serializer.__dict__.pop(name, None)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data
    finally:
        del serializer.initial_data  # the request's data is not kept past the request


class LightRequest(Request):
    """DRF's Request; `META`, which the views and authentication read, without DRF's
    attribute fallback (an AttributeError raised and caught for every read), and `data`
    without a context manager per read; a body for DRF's JSON parser read as DRF reads it
    (the whole body, then the parser), in fewer steps."""

    @property
    def META(self) -> dict:
        return self._request.META

    @property
    def data(self) -> Any:
        if self._full_data is Empty:
            try:
                self._load_data_and_files()
            except AttributeError as exc:
                raise WrappedAttributeError(str(exc)).with_traceback(sys.exc_info()[2]) from exc
        return self._full_data

    def _parse(self) -> tuple[Any, Any]:
        plain = self._request
        length = plain.META.get("CONTENT_LENGTH")
        if plain._read_started or not (length and length.isdigit() and int(length) > 0):
            return super()._parse()  # no body, an odd length, or read already: DRF's own way
        parser = self.negotiator.select_parser(self, self.parsers)
        if not isinstance(parser, JSONParser):
            return super()._parse()
        try:
            # DRF's JSONParser branch: the body (Django checks its size) as a stream.
            parsed = parser.parse(io.BytesIO(plain.body), self.content_type, self.parser_context)
        except Exception:
            # As DRF: empty data, so the error is not met again while answering it.
            self._data = QueryDict("", encoding=plain._encoding)
            self._files = MultiValueDict()
            self._full_data = self._data
            raise
        return parsed, MultiValueDict()


class LightAPIView(APIView):
    """DRF's APIView, with what it builds for every request and what holds no request's
    state built once per view class: the parser, authentication and permission instances
    and the negotiator (stateless: DRF passes the request to each call) and the default
    headers (`Allow`, `Vary`). Throttles keep state per request and are built as DRF does."""

    _shared: dict[tuple[type, str], Any] = {}

    def _once(self, name: str, build: Any) -> Any:
        key = (type(self), name)
        value = self._shared.get(key)
        if value is None:
            value = self._shared[key] = build()
        return value

    def get_parsers(self) -> list:
        return self._once("parsers", super().get_parsers)

    def get_authenticators(self) -> list:
        return self._once("authenticators", super().get_authenticators)

    def get_permissions(self) -> list:
        return self._once("permissions", super().get_permissions)

    def get_content_negotiator(self) -> Any:
        return self._once("negotiator", super().get_content_negotiator)

    def initialize_request(self, request: Any, *args: Any, **kwargs: Any) -> Request:
        return LightRequest(
            request,
            parsers=self.get_parsers(),
            authenticators=self.get_authenticators(),
            negotiator=self.get_content_negotiator(),
            parser_context=self.get_parser_context(request),
        )

    def perform_authentication(self, request: Request) -> None:
        # DRF's `request.user`, its AttributeError guard written out (DRF's is a context
        # manager, a generator per request).
        if "_user" not in request.__dict__:
            try:
                request._authenticate()
            except AttributeError as exc:
                raise WrappedAttributeError(str(exc)).with_traceback(sys.exc_info()[2]) from exc

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any):
        if type(response) is HttpResponse and "Vary" not in response:
            # An answer already rendered, without a Vary header of its own: DRF's headers
            # are set as they are (DRF would merge its Vary into the answer's).
            for key, value in self.headers.items():
                response[key] = value
            return response
        return super().finalize_response(request, response, *args, **kwargs)

    @property
    def default_response_headers(self) -> dict[str, str]:
        # A copy: DRF pops `Vary` from it for each response.
        return dict(self._once("headers", lambda: APIView.default_response_headers.fget(self)))
