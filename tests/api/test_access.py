"""Every route, driven by the owner, another user and an anonymous caller."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ITEM = {
    "id": "inbox_9_zzz",
    "tag": "restock_watch",
    "request": "watch",
    "created_at": "2026-05-25T18:22:14.123Z",
}

# (method, path under /api/sessions/<id>, body, owner's expected status)
ROUTES = [
    ("get", "", None, 200),
    ("patch", "", {"title": "x"}, 200),
    ("get", "/messages", None, 200),
    ("post", "/messages", {"messages": [{"sender": "user", "text": "hi"}]}, 200),
    ("get", "/tokens", None, 200),
    ("post", "/tokens", {"tokens_in": 1, "tokens_out": 1}, 200),
    ("get", "/turns", None, 200),
    ("post", "/turns", None, 200),
    ("post", "/reset-counters", None, 200),
    ("get", "/tasks", None, 200),
    ("put", "/tasks", {"tasks": [{"id": "t1", "content": "c"}]}, 200),
    ("post", "/tasks/t1", {"updates": {"status": "completed"}}, 200),
    ("get", "/permissions?toolName=x", None, 200),
    ("put", "/permissions", {"toolName": "x", "status": "granted"}, 200),
    ("get", "/inbox", None, 200),
    ("post", "/inbox", {"item": ITEM}, 201),
    ("post", "/inbox/update", {"itemId": "inbox_9_zzz", "updates": {"status": "consumed"}}, 404),
    ("get", "/inbox/resolved", None, 200),
    ("post", "/inbox/consume", None, 200),
    ("get", "/permission-prompts", None, 200),
    ("post", "/permission-prompts/t1-slot_1", {"value": "once"}, 404),  # no such prompt
    ("delete", "", None, 204),
]
IDS = [f"{method.upper()} {path or '/'}" for method, path, _, _ in ROUTES]
EMPTY_TOKENS = {
    "token_count": 0,
    "tokens_in_total": 0,
    "tokens_out_total": 0,
    "consumption": {
        "tokens_in": 0,
        "tokens_out": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    },
}


def call(client, method: str, session_id: str, path: str, body):
    return getattr(client, method)(f"/api/sessions/{session_id}{path}", body, format="json")


@pytest.mark.parametrize(("method", "path", "body", "expected"), ROUTES, ids=IDS)
def test_it_serves_the_owner(owner_client, session_id, method, path, body, expected):
    assert call(owner_client, method, session_id, path, body).status_code == expected


@pytest.mark.parametrize("lazy", [False, True], ids=["404", "lazy"])
@pytest.mark.parametrize(("method", "path", "body", "expected"), ROUTES, ids=IDS)
def test_it_answers_another_user_as_if_the_session_did_not_exist(
    other_client, owner_client, session_id, method, path, body, expected, lazy, settings
):
    settings.GLOVE_LAZY_SESSIONS = lazy
    # Ids are per owner: to another user the owner's id names a session of their own that
    # they never created, answered exactly as any id they never used (404; with
    # GLOVE_LAZY_SESSIONS an empty history for a read, their own new session for a first
    # write), never with the owner's data.
    unused = call(other_client, method, "never-used-by-anyone", path, body)
    response = call(other_client, method, session_id, path, body)
    assert response.status_code == unused.status_code
    if method == "get":
        assert response.json() == unused.json()
    # Nothing was written on the owner's session.
    assert owner_client.get(f"/api/sessions/{session_id}/messages").json() == []
    assert owner_client.get(f"/api/sessions/{session_id}/inbox").json() == []


@pytest.mark.parametrize(("method", "path", "body", "expected"), ROUTES, ids=IDS)
def test_it_refuses_an_anonymous_caller(anon_client, session_id, method, path, body, expected):
    response = call(anon_client, method, session_id, path, body)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("method", ["get", "post"])
def test_it_guards_the_session_list(anon_client, method):
    assert getattr(anon_client, method)("/api/sessions", {}, format="json").status_code == 401


def test_it_guards_the_chat_endpoint(anon_client):
    response = anon_client.post("/api/chat", {"messages": []}, format="json")
    assert response.status_code == 401


def test_it_accepts_a_logged_in_browser_session(client, owner, session_id):
    # Session auth for the pages: a logged-in browser reaches its own sessions.
    client.force_login(owner)
    assert client.get(f"/api/sessions/{session_id}/messages").status_code == 200


@pytest.fixture
def lazy_sessions(settings):
    settings.GLOVE_LAZY_SESSIONS = True


def test_it_answers_an_unused_key_with_an_empty_history_and_creates_nothing(
    owner_client, lazy_sessions
):
    messages = owner_client.get("/api/sessions/made-up-in-the-browser/messages")
    tokens = owner_client.get("/api/sessions/made-up-in-the-browser/tokens")
    tasks = owner_client.get("/api/sessions/made-up-in-the-browser/tasks")
    inbox = owner_client.get("/api/sessions/made-up-in-the-browser/inbox")

    assert (messages.status_code, messages.json()) == (200, [])
    assert (tokens.status_code, tokens.json()) == (200, EMPTY_TOKENS)
    assert (tasks.json(), inbox.json()) == ([], [])
    listed = [s["sessionId"] for s in owner_client.get("/api/sessions").json()]
    assert "made-up-in-the-browser" not in listed


def test_a_first_write_creates_the_owners_session_under_that_key(owner_client, lazy_sessions):
    key = "made-up-in-the-browser"
    written = owner_client.post(
        f"/api/sessions/{key}/messages",
        {"messages": [{"sender": "user", "text": "hi"}]},
        format="json",
    )

    assert written.json() == {"ok": True}
    assert owner_client.get(f"/api/sessions/{key}/messages").json() == [
        {"sender": "user", "text": "hi"}
    ]
    assert key in [s["sessionId"] for s in owner_client.get("/api/sessions").json()]


def test_a_deleted_sessions_key_stays_gone(owner_client, session_id):
    owner_client.delete(f"/api/sessions/{session_id}")

    assert owner_client.get(f"/api/sessions/{session_id}/messages").status_code == 404
    written = owner_client.post(
        f"/api/sessions/{session_id}/messages",
        {"messages": [{"sender": "user", "text": "hi"}]},
        format="json",
    )
    assert written.status_code == 404


def test_it_reads_another_users_key_as_an_empty_session_of_ones_own(
    owner_client, other_client, session_id, lazy_sessions
):
    owner_client.post(
        f"/api/sessions/{session_id}/messages",
        {"messages": [{"sender": "user", "text": "mine only"}]},
        format="json",
    )

    assert other_client.get(f"/api/sessions/{session_id}/messages").json() == []
    other_client.post(
        f"/api/sessions/{session_id}/messages",
        {"messages": [{"sender": "user", "text": "theirs"}]},
        format="json",
    )
    mine = owner_client.get(f"/api/sessions/{session_id}/messages").json()
    assert [m["text"] for m in mine] == ["mine only"]


def test_without_lazy_sessions_an_unused_key_is_404_for_reads_and_writes(owner_client):
    key = "made-up-in-the-browser"
    read = owner_client.get(f"/api/sessions/{key}/messages")
    written = owner_client.post(
        f"/api/sessions/{key}/messages",
        {"messages": [{"sender": "user", "text": "hi"}]},
        format="json",
    )

    assert (read.status_code, written.status_code) == (404, 404)
    assert key not in [s["sessionId"] for s in owner_client.get("/api/sessions").json()]
