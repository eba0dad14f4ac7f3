"""The remote store's hot routes (messages, tokens, the session's inbox), plain and hostile.

Until issue 24 these routes had a second, hand-written fast path in front of the DRF views
(`GLOVE_LEAN_ROUTES`), and these requests went through both to compare the bytes. The DRF
views are now the only path: each request is sent once and its answer checked.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.conversations.models import Message, Session

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

# (method, path under the session, JSON body or raw bytes, extra headers, the owner's status)
REQUESTS = [
    ("GET", "messages", None, {}, 200),
    ("GET", "tokens", None, {}, 200),
    ("GET", "inbox", None, {}, 200),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "A flat white"}]}, {}, 200),
    ("POST", "messages", {"messages": [{"sender": "agent", "text": "Sure", "id": "a1"}]}, {}, 200),
    ("POST", "messages", {"messages": []}, {}, 200),
    ("POST", "messages", RICH, {}, 200),
    ("GET", "messages", None, {}, 200),
    ("GET", "messages?since_compaction=true", None, {}, 200),
    ("GET", "messages?since_compaction=0", None, {}, 200),
    ("GET", "messages?format=json", None, {}, 200),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/json"}, 200),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/json; indent=2"}, 200),
    ("GET", "messages", None, {"HTTP_ACCEPT": "application/xml"}, 406),
    ("HEAD", "messages", None, {}, 200),
    ("POST", "messages", {"messages": [{"sender": "bot", "text": "x"}]}, {}, 400),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "nul \u0000"}]}, {}, 400),
    ("POST", "messages", b'{"messages": [{"sender": "user", "text": "\\ud800"}]}', {}, 400),
    ("POST", "messages", {"messages": [{"sender": "user", "text": 5}]}, {}, 400),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": " pad "}]}, {}, 200),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": ""}]}, {}, 400),
    ("POST", "messages", {"messages": [{"sender": "user", "text": "x", "id": "i" * 201}]}, {}, 400),
    ("POST", "messages", {"messages": [{"sender": "user"}]}, {}, 200),
    ("POST", "messages", {"messages": [{"sender": "user", "text": None}]}, {}, 400),
    ("POST", "messages", {"messages": [None]}, {}, 400),
    ("POST", "messages", {"messages": {"sender": "user"}}, {}, 400),
    ("POST", "messages", {"messages": [], "extra": 1}, {}, 200),
    ("POST", "messages", [], {}, 400),
    ("POST", "messages", b'{"messages": [{"sender": "user", "text": NaN}]}', {}, 400),
    ("POST", "messages", b'{"messages": [', {}, 400),
    ("POST", "messages", b"", {}, 400),
    ("POST", "messages", b"\xff\xfe", {}, 400),
    ("POST", "messages", b"[" * 5000, {}, 400),
    ("POST", "tokens", {"tokens_in": 10, "tokens_out": 2}, {}, 200),
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
        200,
    ),
    ("POST", "tokens", {"tokens_in": "5", "tokens_out": 2.0}, {}, 200),
    ("POST", "tokens", {"tokens_in": -1, "tokens_out": 2}, {}, 400),
    ("POST", "tokens", {"tokens_in": 10**12, "tokens_out": 2}, {}, 200),
    ("POST", "tokens", {"tokens_in": True, "tokens_out": 2}, {}, 400),
    ("POST", "tokens", {"tokens_out": 2}, {}, 400),
    ("GET", "tokens", None, {}, 200),
    ("GET", "inbox", None, {}, 200),
    ("PUT", "messages", {"messages": []}, {}, 405),
    ("DELETE", "tokens", None, {}, 405),
]
ALLOW = {"messages": "GET, POST, HEAD, OPTIONS", "tokens": "GET, POST, HEAD, OPTIONS"}


def _client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _send(client: APIClient, method: str, path: str, body, headers: dict):
    if body is None:
        data, content_type = b"", None
    elif isinstance(body, bytes):
        data, content_type = body, "application/json"
    else:
        data, content_type = json.dumps(body).encode(), "application/json"
    kwargs = {"content_type": content_type} if content_type else {}
    return client.generic(method, path, data, **kwargs, **headers)


def _owner_walk(client: APIClient, key: str) -> dict[str, bytes]:
    """Every request in turn to the owner's session `key`; the bodies of the plain GETs."""
    assert client.post("/api/sessions", {"sessionId": key}, format="json").status_code == 201
    bodies = {}
    for method, path, body, headers, status in REQUESTS:
        answer = _send(client, method, f"/api/sessions/{key}/{path}", body, headers)
        assert answer.status_code == status, (method, path, body, headers, answer.content)
        if method != "HEAD":
            assert answer["Content-Type"] == "application/json", (method, path)
            if status >= 400:
                assert set(answer.json()) <= {"error", "field", "details"}, answer.json()
        assert answer["Vary"] == "Accept"
        route = path.split("?")[0]
        if route in ALLOW:
            assert answer["Allow"] == ALLOW[route]
        if method == "GET" and route == "messages" and status == 200:
            bodies[f"{path} {headers}"] = answer.content
    return bodies


def test_the_owner_gets_each_answer_in_json(owner):
    bodies = _owner_walk(_client(owner), "mine")

    history = json.loads(bodies["messages {'HTTP_ACCEPT': 'application/json; indent=2'}"])
    # One history, however a plain JSON answer was asked for; indented when asked.
    plain = [body for name, body in bodies.items() if "indent" not in name and "since" not in name]
    assert json.loads(plain[0]) == history
    assert b"\\u2028" in plain[0]  # escaped, as DRF's JSON renderer writes it
    assert all(body == plain[0] for body in plain[1:])
    assert b"\n  " in bodies["messages {'HTTP_ACCEPT': 'application/json; indent=2'}"]
    assert [m["text"] for m in history[:2]] == ["A flat white", "Sure"]
    assert history[1]["id"] == "a1"
    assert Message.objects.filter(session__owner=owner, session__key="mine", msg_id="pad").exists()
    tokens = _client(owner).get("/api/sessions/mine/tokens").json()
    assert tokens["tokens_in_total"] == 10 + 1 + 5 + 10**12


def test_the_owners_own_ids_are_used_when_another_user_holds_them_as_global_ids(
    owner, django_user_model
):
    rival = _client(django_user_model.objects.create_user("rival"))
    assert rival.post("/api/sessions", {"sessionId": "shared"}, format="json").status_code == 201

    _owner_walk(_client(owner), "shared")

    mine = Session.objects.get(owner=owner, key="shared")
    assert mine.id != "shared"  # the rival holds that global id
    assert Message.objects.filter(session_id="shared").count() == 0
    assert Message.objects.filter(session=mine).count() > 0


@pytest.mark.parametrize("where", ["mine", "no_such_session", "bad%00id", "x" * 300])
def test_an_outsider_learns_nothing_of_the_owners_session(owner, other_user, where):
    owner_client = _client(owner)
    assert owner_client.post("/api/sessions", {"sessionId": "mine"}, format="json").status_code
    owner_client.post(
        "/api/sessions/mine/messages",
        {"messages": [{"sender": "user", "text": "secret"}]},
        format="json",
    )
    outsider = _client(other_user)
    for method, path, body, headers, _status in REQUESTS:
        answer = _send(outsider, method, f"/api/sessions/{where}/{path}", body, headers)
        # An id no row can have is refused; any other names the outsider's own session
        # (none: 404, as for an id that does not exist), never the owner's.
        assert answer.status_code in (400, 404, 405, 406), (where, method, path, body)
        assert b"secret" not in answer.content
    assert list(Message.objects.filter(session__owner=owner).values_list("text", flat=True)) == [
        "secret"
    ]
    assert not Session.objects.filter(owner=other_user).exists()


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
def test_callers_without_a_valid_token_are_refused(owner, credentials):
    assert _client(owner).post("/api/sessions", {"sessionId": "mine"}, format="json").status_code
    stranger = APIClient()
    for method, path, body, _headers, _status in REQUESTS[:8]:
        answer = _send(stranger, method, f"/api/sessions/mine/{path}", body, credentials)
        assert answer.status_code == 401, (method, path, credentials)
        assert answer["WWW-Authenticate"] == "Token"
    assert not Message.objects.exists()


def test_a_token_accepted_once_is_refused_once_deleted(owner):
    client = _client(owner)
    assert client.post("/api/sessions", {"sessionId": "mine"}, format="json").status_code == 201
    assert client.get("/api/sessions/mine/messages").status_code == 200
    Token.objects.filter(user=owner).delete()

    assert client.get("/api/sessions/mine/messages").status_code == 401
