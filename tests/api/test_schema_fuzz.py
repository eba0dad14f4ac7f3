"""Every route of the OpenAPI schema, fuzzed from the schema itself: no input is a 5xx."""

from __future__ import annotations

import json
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import httpx
import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.core import NOT_SET

from inbox.webhooks import sign

# Every route times every way of bending a request: 100-200 s on a shared 2-core machine
# (fuzzed first writes create sessions), past pytest's default 120 s.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db, pytest.mark.timeout(420)]

EXAMPLES_PER_OPERATION = 10  # cases per operation, each sent bent every way (HOSTILE)
# Ways a hostile caller bends a schema-valid request (issue 15 found a 500 behind each).
HOSTILE = ("as generated", "lone surrogate", "null in a list", "deep nesting", "non-ASCII header")
SECRET = "a-long-random-webhook-secret-for-fuzzing"
DEEP_LEVELS = (1_000, 3_000)  # how deep "deep nesting" nests a free-form field


def _leaves(value, path=()):
    """Paths to every string, list and object in a JSON value (the body itself included)."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))


def _replace(value, path, new):
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


def _get(value, path):
    for step in path:
        value = value[step]
    return value


def bend(body, how: str, draw, free_form: frozenset[str] = frozenset()):
    """`body` with one hostile change, at a place the fuzzer picks."""
    if how == "lone surrogate":
        places = [(p, v) for p, v in _leaves(body) if isinstance(v, str)]
        if places:
            path, text = draw(st.sampled_from(places))
            return _replace(body, path, text + "\ud800")
    elif how == "null in a list":
        # Every list nested inside a list item (a message's content, tool_calls, ...)
        # gets a null; the request is otherwise as valid as the schema made it.
        for path, items in list(_leaves(body)):
            if isinstance(items, list) and any(isinstance(step, int) for step in path):
                body = _replace(body, path, [*items, None])
    elif how == "deep nesting":
        # Every object gets each free-form JSON field (any value by the schema: tool inputs,
        # results, parameters) thousands of levels deep; where a field is unknown the
        # server ignores it.
        levels = draw(st.sampled_from(DEEP_LEVELS))
        nested = _deep_list(levels)
        objects = [p for p, v in _leaves(body) if isinstance(v, dict)]
        for path in sorted(objects, key=len, reverse=True):
            current = _get(body, path)
            body = _replace(body, path, {**current, **dict.fromkeys(free_form, nested)})
    return body


def free_form_fields(schema: dict) -> frozenset[str]:
    """Names of the properties the OpenAPI schema lets hold any JSON value."""
    typed = {"type", "$ref", "allOf", "oneOf", "anyOf", "enum"}
    names = set()
    for component in schema.get("components", {}).get("schemas", {}).values():
        for name, prop in component.get("properties", {}).items():
            if not typed & set(prop):
                names.add(name)
    return frozenset(names)


def signed_route(operation) -> bool:
    """Whether the operation takes a signed webhook request (`gloveSignature`)."""
    return any("gloveSignature" in way for way in operation.definition.raw.get("security", []))


# A list thousands of levels deep stands in a body as this text until it is encoded: JSON's
# encoder walked each nesting again for every request (some 8 ms a body).
_DEEP = "glove-fuzz-deep-list-{}-" + uuid.uuid4().hex


def _deep_list(levels: int) -> str:
    return _DEEP.format(levels)


def _dumps(body) -> str:
    text = json.dumps(body, default=str)
    for levels in DEEP_LEVELS:
        text = text.replace(json.dumps(_deep_list(levels)), "[" * levels + "0" + "]" * levels)
    return text


def test_it_serves_an_openapi_3_schema_and_its_docs(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["openapi"].startswith("3.")
    assert "/api/sessions/{session_id}/inbox/update" in schema["paths"]
    assert owner_client.get("/api/docs/").status_code == 200


@dataclass
class Fuzzed:
    """What a fuzz run saw: 5xx answers, every status, and the credentialed ones."""

    failures: list[str] = field(default_factory=list)
    seen: list[int] = field(default_factory=list)
    credentialed: list[int] = field(default_factory=list)

    def check(self, operations: int, examples: int) -> None:
        assert not self.failures, "\n".join(failure[:600] for failure in self.failures)
        # The fuzz got past validation into the services, not only 400s and 404s: one
        # answer in 50 is a success (of 10 cases, each bent every way, one per operation).
        successes = sum(200 <= status < 300 for status in self.seen)
        assert successes > operations * examples // 10, (successes, len(self.seen))
        # The signed routes were reached past their credential, not only refused at it.
        assert any(status != 401 for status in self.credentialed), self.credentialed[:20]


# send(method, path, body or None, headers, as_owner) -> the status the server answered.
Send = Callable[[str, str, "str | None", dict[str, str], bool], int]


def fuzz(raw: dict, session_id: str, chat_token: str, send: Send, examples: int) -> Fuzzed:
    """Every operation of the schema, `examples` times for each way of bending a request,
    through `send` (in process or over HTTP to a running server)."""
    schema = schemathesis.openapi.from_dict(raw)
    free_form = free_form_fields(raw)
    assert {"input_args", "data", "renderData", "input", "parameters"} <= free_form
    # DELETE last: once it removes the owner's session, every later case would be a 404.
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()),
        key=lambda operation: operation.method.upper() == "DELETE",
    )
    assert len(operations) >= 20
    found = Fuzzed()

    for operation in operations:
        # Each generated case is sent once for every way of bending it: drawing a case from
        # the schema costs more than sending it. Half the cases use the owner's real
        # session, so the fuzz reaches the services behind the 404 instead of stopping at
        # "no such session".
        @given(
            case=operation.as_strategy(),
            own_session=st.booleans(),
            signed=st.just(signed_route(operation)),
            data=st.data(),
        )
        @hypothesis_settings(
            max_examples=examples,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        def probe(case, own_session: bool, signed: bool, data) -> None:
            params = dict(case.path_parameters or {})
            if own_session and "session_id" in params:
                params["session_id"] = session_id
            if own_session and "token" in params:
                params["token"] = chat_token
            path = case.path
            for name, value in params.items():
                path = path.replace("{" + name + "}", quote(str(value), safe=""))
            if case.query:
                path += "?" + urlencode(case.query, doseq=True)
            for how in HOSTILE:
                send_bent(case, path, how, own_session, signed, data)

        def send_bent(case, path: str, how: str, own_session: bool, signed: bool, data) -> None:
            as_owner = True
            body = None
            headers: dict[str, str] = {}
            if case.body is not NOT_SET:
                body = _dumps(bend(case.body, how, data.draw, free_form))
            if how == "non-ASCII header":
                # Headers arrive as latin-1: any byte 0x80-0xFF is a non-ASCII character.
                headers["X-Glove-Signature"] = data.draw(
                    st.sampled_from(["sha256=caf\u00e9", "\u00ff" * 64, "sha256=" + "\u00e9" * 64])
                )
                headers["X-Glove-Timestamp"] = str(int(time.time()))
                # Anonymous: a logged-in caller is authenticated before the signature is read.
                as_owner = False
            elif own_session and signed and body is not None:
                stamp = str(int(time.time()))
                headers["X-Glove-Timestamp"] = stamp
                headers["X-Glove-Signature"] = sign(SECRET, stamp, body.encode())
                as_owner = False
            elif own_session and "token" in (case.path_parameters or {}):
                as_owner = False  # the URL is the credential
            status = send(case.method, path, body, headers, as_owner)
            found.seen.append(status)
            if not as_owner and how != "non-ASCII header":
                found.credentialed.append(status)
            if status >= 500:
                sent = (body or "")[:300]
                found.failures.append(f"{how} -> {status}: {case.method} {path} {sent}")

        probe()

    found.check(len(operations), examples)
    return found


def in_process(owner_client) -> Send:
    owner_client.raise_request_exception = False  # a 500 is collected, not raised
    anonymous = Client(raise_request_exception=False)

    def send(method, path, body, headers, as_owner) -> int:
        client = owner_client if as_owner else anonymous
        kwargs: dict = {f"HTTP_{name.upper().replace('-', '_')}": v for name, v in headers.items()}
        if body is not None:
            kwargs.update(data=body, content_type="application/json")
        with warnings.catch_warnings():
            # The chat stream is async; the test client drains it synchronously.
            warnings.simplefilter("ignore")
            response = client.generic(method, path, **kwargs)
            # An event stream (SSE) never ends by itself: its status and headers are the
            # answer here (tests/api/test_agent_client.py reads its body).
            if response.streaming and not response.get("Content-Type", "").startswith(
                "text/event-stream"
            ):
                b"".join(response)
        return response.status_code

    return send


def over_http(base_url: str, token: str) -> Send:
    def send(method, path, body, headers, as_owner) -> int:
        # Header values as the bytes a client puts on the wire (latin-1: 0x80-0xFF too).
        sent = {k: v.encode("latin-1", "replace") for k, v in headers.items()}
        if as_owner:
            sent["Authorization"] = f"Token {token}".encode()
        if body is not None:
            sent["Content-Type"] = b"application/json"
        content = body.encode("utf-8", "surrogatepass") if body is not None else None
        with httpx.Client(base_url=base_url, timeout=60) as client:
            # Only the status and headers: an event stream never ends by itself.
            with client.stream(method, path, content=content, headers=sent) as response:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    response.read()
                return response.status_code

    return send


# About 35 s of CPU; on a machine shared by several test runs that took over the default 120 s.
@pytest.mark.timeout(600)
def test_it_never_answers_a_fuzzed_request_with_a_5xx(owner_client, session_id, settings):
    settings.GLOVE_WEBHOOK_SECRET = SECRET  # so signed-webhook headers are checked too
    raw = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    # The signed-URL routes too, with a real credential half the time: the chat URL's
    # token, and a body signed with the webhook secret (each signature is accepted once).
    minted = owner_client.post(f"/api/sessions/{session_id}/chat-url")
    assert minted.status_code == 200, minted.content
    chat_token = minted.json()["url"].rstrip("/").rsplit("/", 1)[1]
    fuzz(raw, session_id, chat_token, in_process(owner_client), EXAMPLES_PER_OPERATION)
