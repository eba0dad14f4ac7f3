"""The hot routes' lean path answers exactly as the DRF views do (issue 13).

Every request below is sent twice, to two sessions set up alike: once with the lean path on
and once with it off (`GLOVE_LEAN_ROUTES = False`: DRF answers everything). Status, headers
and body must be the same bytes, for plain requests the lean path answers and for the
hostile or unusual ones it hands to DRF.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.api import inbox_views, store_views

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

RICH = {
    "messages": [
        {"sender": "user", "text": "Line\u2028sep \u00e9 \U0001f600 <b>&</b>", "id": "m1"},
        {
            "sender": "agent",
            "text": "",
            "tool_calls": [{"id": "c1", "tool_name": "get_menu", "input_args": {"n": 1.5}}],
            "reasoning_content": "hmm",
        },
        {
            "sender": "user",
            "text": "tool results",
            "tool_results": [
                {"tool_name": "get_menu", "call_id": "c1", "result": {"status": "success"}}
            ],
            "provider_options": {"a": [1, None]},
        },
        {"sender": "user", "text": "Summary", "is_compaction": True},
        {"sender": "user", "text": "x", "framework_context": "inbox", "is_skill_injection": True},
        {"sender": "agent", "text": "img", "content": [{"type": "text", "text": "hi"}]},
    ]
}

# (method, path under the session, JSON body or raw bytes, extra headers)
REQUESTS = [
    ("GET", "messages", None, {}),
    ("GET", "tokens", None, {}),
    ("GET", "inbox", None, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "A flat white"}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "agent", "text": "Sure", "id": "a1"}]}, {}),
    ("POST", "messages", {"messages": []}, {}),
    ("POST", "messages", RICH, {}),
    ("GET", "messages", None, {}),
    ("GET", "messages?since_compaction=true", None, {}),
    ("GET", "messages?since_compaction=0", None, {}),
    ("GET", "messages?format=json", None, {}),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/json"}),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/json; indent=2"}),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/xml"}),
    ("HEAD", "messages", None, {}),
    ("POST", "messages", {"messages": [{"sender": "bot", "text": "x"}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "nul \u0000"}]}, {}),
    ("POST", "messages", b'{"messages": [{"sender": "user", "text": "\\ud800"}]}', {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": 5}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": " pad "}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": ""}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": "i" * 201}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user"}]}, {}),
    ("POST", "messages", {"messages": [{"sender": "user", "text": None}]}, {}),
    ("POST", "messages", {"messages": [None]}, {}),
    ("POST", "messages", {"messages": {"sender": "user"}}, {}),
    ("POST", "messages", {"messages": [], "extra": 1}, {}),
    ("POST", "messages", [], {}),
    ("POST", "messages", b'{"messages": [{"sender": "user", "text": NaN}]}', {}),
    ("POST", "messages", b'{"messages": [', {}),
    ("POST", "messages", b"", {}),
    ("POST", "messages", b"\xff\xfe", {}),
    ("POST", "messages", b"[" * 5000, {}),
    ("POST", "tokens", {"tokens_in": 10, "tokens_out": 2}, {}),
    (
        "POST",
        "tokens",
        {
            "tokens_in": 1,
            "tokens_out": 1,
            "cache_creation_input_tokens": 3,
            "cache_read_input_tokens": None,
        },
        {},
    ),
    ("POST", "tokens", {"tokens_in": "5", "tokens_out": 2.0}, {}),
    ("POST", "tokens", {"tokens_in": -1, "tokens_out": 2}, {}),
    ("POST", "tokens", {"tokens_in": 10**12, "tokens_out": 2}, {}),
    ("POST", "tokens", {"tokens_in": True, "tokens_out": 2}, {}),
    ("POST", "tokens", {"tokens_out": 2}, {}),
    ("GET", "tokens", None, {}),
    ("GET", "inbox", None, {}),
    ("PUT", "messages", {"messages": []}, {}),
    ("DELETE", "tokens", None, {}),
]


def _client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    client.get("/api/sessions")  # DRF checks the token once; this process then knows it
    return client


def _send(client: APIClient, method: str, path: str, body, headers: dict):
    if body is None:
        data, content_type = b"", None
    elif isinstance(body, bytes):
        data, content_type = body, "application/json"
    else:
        data, content_type = json.dumps(body).encode(), "application/json"
    kwargs = {"content_type": content_type} if content_type else {}
    response = client.generic(method, path, data, **kwargs, **headers)
    return (
        response.status_code,
        sorted((k.lower(), v) for k, v in response.headers.items()),
        response.content,
    )


def _sessions(client: APIClient) -> tuple[str, str]:
    for name in ("lean_on", "lean_off"):
        assert client.post("/api/sessions", {"sessionId": name}, format="json").status_code == 201
    return "lean_on", "lean_off"


def _compare(settings, client, requests, where=lambda s: f"/api/sessions/{s}/") -> None:
    on, off = _sessions(client)
    for method, path, body, headers in requests:
        settings.GLOVE_LEAN_ROUTES = True
        lean = _send(client, method, where(on) + path, body, headers)
        settings.GLOVE_LEAN_ROUTES = False
        drf = _send(client, method, where(off) + path, body, headers)
        assert lean == drf, (method, path, body, headers)


def test_the_owner_gets_the_same_answers_either_way(settings, owner):
    _compare(settings, _client(owner), REQUESTS)


def test_both_paths_follow_the_owners_own_ids_when_another_user_holds_them(
    settings, owner, django_user_model
):
    from gloveapp.conversations.models import Message, Session

    rival = _client(django_user_model.objects.create_user("rival"))
    _sessions(rival)  # the rival holds "lean_on" and "lean_off" as global ids

    _compare(settings, _client(owner), REQUESTS)

    mine = Session.objects.filter(owner=owner)
    assert sorted(mine.values_list("key", flat=True)) == ["lean_off", "lean_on"]
    assert not mine.filter(id__in=["lean_on", "lean_off"]).exists()
    assert Message.objects.filter(session_id__in=["lean_on", "lean_off"]).count() == 0
    assert Message.objects.filter(session__owner=owner).count() > 0


def test_an_outsider_and_an_unknown_session_get_the_same_answer_either_way(
    settings, owner, other_user
):
    owner_client = _client(owner)
    _sessions(owner_client)
    outsider = _client(other_user)
    for where in ("lean_on", "lean_off", "no_such_session", "bad%00id", "x" * 300):
        for method, path, body, headers in REQUESTS:
            settings.GLOVE_LEAN_ROUTES = True
            lean = _send(outsider, method, f"/api/sessions/{where}/{path}", body, headers)
            settings.GLOVE_LEAN_ROUTES = False
            drf = _send(outsider, method, f"/api/sessions/{where}/{path}", body, headers)
            assert lean == drf, (where, method, path, body)
            # An id no row can have is a 404; any other names the outsider's own session
            # (an empty one, or created by a first write), never the owner's.
            unusable = where.startswith("bad") or len(where) > 200
            assert lean[0] in ((400, 404, 405, 406) if unusable else (200, 201, 400, 404, 405, 406))


@pytest.mark.parametrize(
    "credentials",
    [
        {},
        {"HTTP_AUTHORIZATION": "Token"},
        {"HTTP_AUTHORIZATION": "Token a b"},
        {"HTTP_AUTHORIZATION": "Token nope"},
        {"HTTP_AUTHORIZATION": "Bearer abc"},
    ],
)
def test_callers_without_a_known_token_get_the_same_refusal_either_way(
    settings, owner, credentials
):
    _sessions(_client(owner))
    stranger = APIClient()
    for method, path, body, _headers in REQUESTS[:8]:
        answers = []
        for lean in (True, False):
            settings.GLOVE_LEAN_ROUTES = lean
            answers.append(
                _send(stranger, method, f"/api/sessions/lean_on/{path}", body, credentials)
            )
        assert answers[0] == answers[1]
        assert answers[0][0] in (401, 403)


@pytest.mark.parametrize(
    ("route", "method", "body"),
    [
        ("messages", "GET", None),
        ("messages", "POST", {"messages": [{"sender": "user", "text": "hi"}]}),
        ("tokens", "GET", None),
        ("tokens", "POST", {"tokens_in": 1, "tokens_out": 1}),
        ("inbox", "GET", None),
    ],
)
def test_a_plain_request_with_a_known_token_skips_drf(monkeypatch, owner, route, method, body):
    client = _client(owner)
    _sessions(client)
    view = {
        "messages": store_views.MessagesApi,
        "tokens": store_views.TokensApi,
        "inbox": inbox_views.InboxApi,
    }[route]

    def refuse(*args, **kwargs):
        raise AssertionError("DRF's view answered")

    monkeypatch.setattr(view, "initial", refuse)

    status, _, _ = _send(client, method, f"/api/sessions/lean_on/{route}", body, {})

    assert status == 200
