"""What the API keeps beside DRF's own classes, each pinned to the behaviour DRF lacks or
to DRF's own answer: the stored-JSON renderer and its response, the remembered content
negotiation, the parser's answer to JSON nested too deeply, the input serializers built once
per thread and the wire objects' validation loop (DRF's `is_valid`, the same answers)."""

from __future__ import annotations

import io
import json

import pytest
from django.http import Http404, QueryDict
from rest_framework import serializers
from rest_framework.exceptions import NotAcceptable, ParseError, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer

from gloveapp.api.agents.turns import AgentTurnStartApi
from gloveapp.api.common.fields import MessageSerializer, WireObject, validated
from gloveapp.api.common.parsers import SafeJSONParser
from gloveapp.api.common.rendering import (
    JSONText,
    RememberedContentNegotiation,
    StoredJSONRenderer,
)
from gloveapp.api.store.inbox import InboxApi
from gloveapp.api.store.session_data import MessagesApi
from gloveapp.api.store.sessions import SessionListApi

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

STORED = b'[{"sender":"user","text":"caf\xc3\xa9 \xe2\x98\x95","z":1,"a":2}]'


def test_a_body_held_as_json_text_goes_out_as_those_bytes_which_drfs_renderer_cannot():
    assert StoredJSONRenderer().render(JSONText(STORED), "application/json") == STORED
    with pytest.raises(TypeError):
        JSONRenderer().render(JSONText(STORED), "application/json")
    indented = StoredJSONRenderer().render(JSONText(STORED), "application/json; indent=2")
    assert indented == JSONRenderer().render(json.loads(STORED), "application/json; indent=2")


def test_a_history_is_its_stored_wire_texts_and_indented_on_request(owner_client, session_id):
    sent = {"messages": [{"sender": "user", "text": "café ☕", "zeta": 1, "alpha": 2}]}
    url = f"/api/sessions/{session_id}/messages"
    assert owner_client.post(url, sent, format="json").content == b'{"ok":true}'

    compact = owner_client.get(url)
    assert compact["Content-Type"] == "application/json"
    assert json.loads(compact.content)[0]["text"] == "café ☕"
    assert b" " not in compact.content.replace("café ☕".encode(), b"")  # compact, unchanged
    indented = owner_client.get(url, HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b"[\n  {")
    assert json.loads(indented.content) == json.loads(compact.content)
    page = owner_client.get(url, HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and b"caf" in page.content  # DRF's browsable page


DEEP = b"[" * 100_000 + b"]" * 100_000


def test_json_nested_too_deeply_is_a_parse_error_where_drfs_parser_raises_recursion():
    with pytest.raises(RecursionError):
        JSONParser().parse(io.BytesIO(DEEP))
    with pytest.raises(ParseError, match="nested too deeply"):
        SafeJSONParser().parse(io.BytesIO(DEEP))
    # Everything else is DRF's parser and its words.
    for body in (b'{"a": 1}', b"[1, 2]", "\ufeff{}".encode()):
        try:
            expected = JSONParser().parse(io.BytesIO(body))
        except ParseError as error:
            with pytest.raises(ParseError) as ours:
                SafeJSONParser().parse(io.BytesIO(body))
            assert ours.value.detail == error.detail
        else:
            assert SafeJSONParser().parse(io.BytesIO(body)) == expected


def _drf_answer(serializer_class, data):
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return "valid", serializer.validated_data
    return "invalid", json.loads(json.dumps(serializer.errors))


def _our_answer(serializer_class, data):
    try:
        return "valid", validated(serializer_class, data)
    except ValidationError as error:
        return "invalid", json.loads(json.dumps(error.detail))


MESSAGE = {"sender": "user", "text": "hi"}
CASES = [
    (MessagesApi.InputSerializer, {"messages": [MESSAGE]}),
    (MessagesApi.InputSerializer, {"messages": [MESSAGE, {"sender": "robot", "text": 5}]}),
    (MessagesApi.InputSerializer, {"messages": [None]}),
    (MessagesApi.InputSerializer, {"messages": "hi"}),
    (MessagesApi.InputSerializer, {}),
    (MessagesApi.InputSerializer, [MESSAGE]),
    (MessageSerializer, {**MESSAGE, "provider_options": {"kept": True}}),
    (MessageSerializer, {**MESSAGE, "tool_calls": [{"tool_name": 7}], "is_compaction": "x"}),
    (InboxApi.InputSerializer, {"item": {"id": "i1", "tag": "t", "request": "ok?"}}),
    (InboxApi.InputSerializer, {"item": {"id": "i1", "tag": "t", "status": "nope"}}),
    (SessionListApi.InputSerializer, {"sessionId": "s1"}),
    (SessionListApi.InputSerializer, {"sessionId": ""}),
    (SessionListApi.QuerySerializer, QueryDict("parent=s1&limit=5")),
    (SessionListApi.QuerySerializer, QueryDict("limit=-1&cursor=made-up")),
    (AgentTurnStartApi.InputSerializer, {"text": "hi", "images": []}),
]


@pytest.mark.parametrize(("serializer_class", "data"), CASES)
def test_input_is_validated_as_drfs_is_valid_validates_it(serializer_class, data, monkeypatch):
    ours = _our_answer(serializer_class, data)
    assert _our_answer(serializer_class, data) == ours  # a thread's serializer keeps nothing
    assert _drf_answer(serializer_class, data) == ours
    # The wire objects' loop swapped for DRF's own: the same answer.
    monkeypatch.setattr(WireObject, "to_internal_value", serializers.Serializer.to_internal_value)
    monkeypatch.setattr(WireObject, "run_validators", serializers.Serializer.run_validators)
    assert _drf_answer(serializer_class, data) == ours


ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "application/json; indent=2",
    "text/html",
    "text/html;q=0.5, application/json",
    "application/xml",
    "image/png, */*;q=0.1",
]


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", ["", "format=json", "format=api", "format=xml", "limit=5"])
def test_the_remembered_negotiation_answers_as_drfs(rf, accept, query):
    from rest_framework.request import Request

    def answer(negotiation):
        headers = {} if accept is None else {"HTTP_ACCEPT": accept}
        request = Request(rf.get(f"/api/sessions?{query}", **headers))
        renderers = [StoredJSONRenderer(), BrowsableAPIRenderer()]
        try:
            renderer, media_type = negotiation.select_renderer(request, renderers)
        except NotAcceptable as refusal:
            return "406", str(refusal.detail)
        except Http404:  # a `?format=` no renderer has
            return "404", None
        return type(renderer), media_type

    drfs = answer(DefaultContentNegotiation())
    assert answer(RememberedContentNegotiation()) == drfs
    assert answer(RememberedContentNegotiation()) == drfs  # remembered


@pytest.mark.parametrize("accept", [None, "application/json; indent=2", "text/html"])
def test_a_json_text_answer_is_drfs_response_byte_for_byte(owner_client, session_id, accept):
    # `{"ok": true}` is written without DRF's Response when it goes out unchanged; the
    # same route's 400 (DRF's Response) has the same Content-Type and headers.
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    url = f"/api/sessions/{session_id}/messages"
    ok = owner_client.post(url, {"messages": [MESSAGE]}, format="json", **headers)
    refused = owner_client.post(url, {"messages": "x"}, format="json", **headers)
    assert ok["Content-Type"] == refused["Content-Type"]
    assert ok.get("Vary") == refused.get("Vary")
    assert ok.get("Allow") == refused.get("Allow")
    if accept is None:
        assert ok.content == b'{"ok":true}'
    elif accept.startswith("application/json"):
        assert ok.content == b'{\n  "ok": true\n}'


def test_a_refusal_names_the_field_through_the_route(owner_client, session_id):
    url = f"/api/sessions/{session_id}/messages"
    bad = {"messages": [MESSAGE, {"sender": "user", "text": 5}]}
    answer = owner_client.post(url, bad, format="json")
    assert answer.status_code == 400
    assert answer.json()["field"] == "messages[1].text"
    assert owner_client.post(url, {"messages": [MESSAGE]}, format="json").status_code == 200
