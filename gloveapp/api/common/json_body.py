"""A JSON body read off an ASGI connection and held to the project's JSON rules before an SDK
(MCP, A2A) parses it: at most `DATA_UPLOAD_MAX_MEMORY_SIZE` bytes, UTF-8, JSON without
NaN/Infinity, nested at most `MAX_BODY_DEPTH` levels. Left to themselves, the SDKs answered
a body nested 10,000 deep or not UTF-8 with a 500 or an internal error."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from gloveapp.core import input_rules

# The JSON-RPC envelope (request, params, arguments) around a tool's input, which nests at
# most `input_rules.MAX_JSON_DEPTH` like every JSON field.
MAX_BODY_DEPTH = input_rules.MAX_JSON_DEPTH + 8


class BodyRefused(ValueError):
    """The body breaks the JSON rules; the message says how (a JSON-RPC parse error)."""


class Disconnected(Exception):
    """The client went away before its body was read."""


def max_body_bytes() -> int:
    return int(getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None) or 2_621_440)


def check_body(body: bytes, *, storable_strings: bool = False) -> None:
    """Raise `BodyRefused` unless `body` is JSON the project accepts. `storable_strings`:
    refuse a NUL or a lone surrogate anywhere too (for an SDK that cannot carry them, as
    protobuf cannot); otherwise they go on to the tools, whose answer names the field."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused("the body is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BodyRefused("the body is nested too deeply") from None
    except ValueError as exc:
        raise BodyRefused(f"the body is not JSON ({exc})") from None
    if input_rules.json_depth(value, cap=MAX_BODY_DEPTH) > MAX_BODY_DEPTH:
        raise BodyRefused(f"the body is nested deeper than {MAX_BODY_DEPTH} levels")
    if storable_strings:
        where, problem = input_rules.first_unstorable(value)
        if problem:
            raise BodyRefused(f"{where or 'the body'} holds {problem}")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


async def read_body(receive: Any, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyRefused(f"the body is larger than {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Any) -> Any:
    """A `receive` that hands the SDK the body already read, then the real channel."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict:
        if pending:
            return pending.pop()
        return await receive()

    return replay
