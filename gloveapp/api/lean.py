"""The remote store's hot routes without DRF on the common path (issue 13).

A GET of a 50-message history cost 1.1-1.5 ms of CPU in gunicorn against 0.33 ms for a
static answer: DRF's dispatch (request wrapping, authenticators, content negotiation,
serializers, renderer) and the per-message conversion. Each hot route here keeps its DRF
view and puts a lean function in front of it:

- the lean function answers only the plain case it can answer exactly as the DRF view
  would, byte for byte (status, headers, JSON): a token this process already checked
  (`token_auth`'s cache), JSON in and out, a request whose shape it has checked by hand;
- anything else (session cookies and their CSRF / same-origin JSON rule, an unknown or
  uncached token, other Accept headers or `?format=`, a body it does not recognise, every
  error: 404, 400 naming the field, 401/403) falls through to the DRF view untouched, which
  answers it as before (and fills the token cache for the next request).

The URL keeps the DRF view's attributes (`cls`, `initkwargs`, ...), so the OpenAPI schema
is the same. `GLOVE_LEAN_ROUTES=0` turns the lean path off (the tests compare both).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework.renderers import JSONRenderer

from gloveapp.api.errors import exception_handler
from gloveapp.api.store_views import tokens_wire
from gloveapp.api.token_auth import remembered_user
from gloveapp.conversations import selectors, services
from gloveapp.conversations.access import (
    forget_owned_session_id,
    owned_session,
    owned_session_id,
    remembered_owned_session_id,
    unused_key,
    usable_session_id,
)
from gloveapp.core import input_rules
from gloveapp.core.types import Message, TokenUsage
from inbox import selectors as inbox_selectors

Fast = Callable[..., "HttpResponse | None"]

# The Accept headers DRF answers with its JSON renderer and no parameters (no `indent=`).
_JSON_ACCEPTS = frozenset({"", "*/*", "application/json"})
_RENDERER = JSONRenderer()
_OK = _RENDERER.render({"ok": True})
_EMPTY_LIST = _RENDERER.render([])
MAX_LEAN_BODY = 64 * 1024  # bytes; larger bodies go through DRF's parser


def lean(drf_view: Callable[..., Any], **fast_by_method: Fast) -> Callable[..., Any]:
    """A URL callback: `fast_by_method[method](request, **kwargs)` answers the plain case or
    returns None, and then the DRF view answers."""
    instance = drf_view.cls()
    if hasattr(instance, "get") and not hasattr(instance, "head"):
        instance.head = instance.get  # as Django's View.setup does for each request
    allow = ", ".join(instance.allowed_methods)

    @functools.wraps(drf_view)  # `cls`, `initkwargs`, `csrf_exempt`: the schema sees DRF's view
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        fast = fast_by_method.get(request.method)
        if fast is not None and settings.GLOVE_LEAN_ROUTES:
            user = _plain_token_user(request)
            if user is not None:
                response = fast(request, user, **kwargs)
                if response is not None:
                    response["Allow"] = allow
                    return response
        return drf_view(request, *args, **kwargs)

    return view


def _plain_token_user(request: HttpRequest) -> Any:
    """The user of a `Token <key>` this process has checked lately, for a request DRF would
    answer in JSON; None for anything else (DRF then authenticates it, or refuses it)."""
    meta = request.META
    if meta.get("HTTP_ACCEPT", "") not in _JSON_ACCEPTS or "format" in request.GET:
        return None
    header = meta.get("HTTP_AUTHORIZATION")
    if not header:
        return None
    try:
        # As DRF's TokenAuthentication reads it: bytes, split on ASCII whitespace.
        parts = header.encode("iso-8859-1").split()
        if len(parts) != 2 or parts[0].lower() != b"token":
            return None
        key = parts[1].decode()
    except UnicodeError:
        return None
    return remembered_user(key)


def _json(data: Any, status: int = 200) -> HttpResponse:
    return _json_bytes(_RENDERER.render(data), status=status)


def _json_bytes(body: bytes, status: int = 200) -> HttpResponse:
    """JSON as DRF's JSONRenderer wrote it, with the headers DRF's view adds."""
    response = HttpResponse(body, content_type="application/json", status=status)
    response["Vary"] = "Accept"  # DRF's, with more than one renderer
    return response


def _not_found(exc: Http404) -> HttpResponse:
    """The 404 DRF's view would answer: the project's exception handler, rendered."""
    answer = exception_handler(exc, {})
    return _json(answer.data, status=answer.status_code)


def _ok() -> HttpResponse:
    return _json_bytes(_OK)


def _json_body(request: HttpRequest) -> Any:
    """The body as DRF's JSON parser reads it, or None where DRF should read it (and maybe
    refuse it): only `application/json` without parameters is read here, as UTF-8."""
    if request.META.get("CONTENT_TYPE") != "application/json":
        return None
    try:
        # `request.body` refuses what DATA_UPLOAD_MAX_MEMORY_SIZE does not allow; DRF's
        # parser reads the stream and does not: a large body is DRF's to read.
        if not 0 < int(request.META.get("CONTENT_LENGTH") or 0) <= MAX_LEAN_BODY:
            return None
    except ValueError:
        return None
    try:
        return json.loads(request.body.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN / Infinity: DRF's parser refuses them


def _flag(request: HttpRequest, name: str) -> bool:
    return request.GET.get(name, "").lower() in {"1", "true", "yes"}


def _plain_text(value: Any) -> bool:
    """What DRF's TextField takes unchanged: a string without NUL or lone surrogates."""
    return type(value) is str and not input_rules.unstorable_text_problem(value)


def _plain_id(value: Any) -> bool:
    """What `MessageSerializer.id` takes unchanged (it trims and refuses blanks)."""
    return _plain_text(value) and 0 < len(value) <= 200 and value.strip() == value


# -- messages -------------------------------------------------------------------------------


def messages_get(request: HttpRequest, user: Any, session_id: str) -> HttpResponse | None:
    body = None
    if usable_session_id(session_id):
        body = selectors.read_owned_messages_json(
            session_id, owner=user, since_compaction=_flag(request, "since_compaction")
        )
    if body is None and usable_session_id(session_id) and unused_key(user, session_id):
        body = _EMPTY_LIST  # a key its owner has not used yet: nothing is created
    if body is None:
        return _not_found(Http404("Session not found."))  # the DRF view's words
    return _json_bytes(body)


def _plain_messages(data: Any) -> list[Message] | None:
    """`{"messages": [{sender, text, id?}, ...]}` as runtime messages, or None."""
    if type(data) is not dict or len(data) != 1 or type(data.get("messages")) is not list:
        return None
    messages = []
    for item in data["messages"]:
        if type(item) is not dict or not item.keys() <= {"sender", "text", "id"}:
            return None
        sender = item.get("sender")
        text = item.get("text", "")
        msg_id = item.get("id")
        if sender not in ("user", "agent") or type(sender) is not str or not _plain_text(text):
            return None
        if msg_id is not None and not _plain_id(msg_id):
            return None
        messages.append(Message(sender=sender, text=text, id=msg_id))
    return messages


def messages_post(request: HttpRequest, user: Any, session_id: str) -> HttpResponse | None:
    if "idempotency-key" in request.headers:
        return None  # an idempotent append: DRF's view keeps the key with the write
    messages = _plain_messages(_json_body(request))
    if messages is None:
        return None
    try:
        # The owner's key -> the global id, remembered: the append itself checks that the
        # row is still this owner's session of this key (SessionGone when deleted since).
        global_id = remembered_owned_session_id(user, session_id)
    except Http404:  # a first write creates the session, or a 404: DRF's view answers
        return None
    try:
        services.messages_append(
            session_id=global_id, messages=messages, owned_by=(user.pk, session_id)
        )
    except services.SessionGone:
        forget_owned_session_id(user, session_id)
        return None  # nothing was written: DRF's view looks the key up afresh and answers
    except ValueError:
        return None  # refused before anything was written: DRF's view answers it
    return _ok()


# -- counters ------------------------------------------------------------------------------


def tokens_get(request: HttpRequest, user: Any, session_id: str) -> HttpResponse | None:
    try:
        session = owned_session(user, session_id)  # the DRF view's own lookup (by key)
    except Http404:
        return None  # a key not used yet (zero counts), or a 404: DRF's view answers
    return _json(tokens_wire(session))


_USAGE_KEYS = frozenset(
    {"tokens_in", "tokens_out", "cache_creation_input_tokens", "cache_read_input_tokens"}
)


def _plain_count(value: Any) -> bool:
    # DRF's IntegerField also takes "5" and 5.0; those go through it.
    return type(value) is int and 0 <= value <= input_rules.MAX_TOKENS_PER_CALL


def tokens_post(request: HttpRequest, user: Any, session_id: str) -> HttpResponse | None:
    data = _json_body(request)
    if type(data) is not dict or not data.keys() <= _USAGE_KEYS:
        return None
    if not (_plain_count(data.get("tokens_in")) and _plain_count(data.get("tokens_out"))):
        return None
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        if data.get(key) is not None and not _plain_count(data[key]):
            return None
    try:
        session_id = owned_session_id(user, session_id)
    except Http404:
        return None  # a first write creates the session, or a 404: DRF's view answers
    try:
        services.tokens_add(session_id=session_id, usage=TokenUsage(**data))
    except (ValueError, services.SessionGone):
        return None  # refused before anything was written: DRF's view answers it
    return _ok()


# -- the session's inbox -------------------------------------------------------------------


def inbox_get(request: HttpRequest, user: Any, session_id: str) -> HttpResponse | None:
    try:
        session_id = owned_session_id(user, session_id)
    except Http404:
        return None  # a key not used yet (no items), or a 404: DRF's view answers
    return _json([item.to_dict() for item in inbox_selectors.read_inbox_items(session_id)])
