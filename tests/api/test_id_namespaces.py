"""Ids are per owner: another user's session or inbox item id is granted like a fresh one.

Issue 15: a 409 "already exists" for an id someone else holds told an outsider that the id
was taken. Now a session's id is its owner's own (`key`), and an inbox item's is its
session's own; a colliding id gets a fresh global id behind the scenes, which only staff
and resolvers see. An owner's own duplicates stay 409, and a deleted session's events are
never inherited by whoever takes its id next.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.api.store.chat_url import SALT
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import SERVER_ID_PREFIXES
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from inbox.models import InboxItem
from inbox.services import inbox_item_add, inbox_item_resolve
from mesh.services import mesh_session_id

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

TIMESTAMPS = ("createdAt", "updatedAt")


def create(client, session_id: str, **extra):
    return client.post("/api/sessions", {"sessionId": session_id, **extra}, format="json")


def shape(response) -> tuple[int, dict]:
    """What a caller can compare between two answers: the status and the body, with the
    id and the clock taken out."""
    body = {k: v for k, v in response.json().items() if k not in ("sessionId", *TIMESTAMPS)}
    return response.status_code, {"keys": sorted(response.json()), **body}


def say(client, session_id: str, text: str) -> None:
    response = client.post(
        f"/api/sessions/{session_id}/messages",
        {"messages": [{"sender": "user", "text": text}]},
        format="json",
    )
    assert response.status_code == 200, response.json()


def texts(client, session_id: str) -> list[str]:
    response = client.get(f"/api/sessions/{session_id}/messages")
    assert response.status_code == 200, response.json()
    return [message["text"] for message in response.json()]


def item(item_id: str, request: str = "Tell me when Kenya AA is back.") -> dict:
    return {
        "item": {
            "id": item_id,
            "tag": "restock_watch",
            "request": request,
            "status": "pending",
            "blocking": False,
            "created_at": "2026-05-25T18:22:14.000Z",
        }
    }


@pytest.fixture
def staff_client() -> APIClient:
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    return client


@pytest.fixture
def shared_id(owner_client, other_client, session_id) -> str:
    """The owner's session id, taken again by the other user (the owner said something)."""
    say(owner_client, session_id, "My card ends 4242.")
    assert create(other_client, session_id, title="Tea").status_code == 201
    return session_id


# -- sessions ---------------------------------------------------------------------------------


def test_it_grants_another_users_session_id_exactly_like_a_fresh_one(other_client, session_id):
    taken = create(other_client, session_id, title="Tea")
    fresh = create(other_client, "glove_nobody_has_this", title="Tea")

    assert taken.status_code == fresh.status_code == 201
    assert shape(taken) == shape(fresh)
    assert taken.json()["sessionId"] == session_id
    assert fresh.json()["sessionId"] == "glove_nobody_has_this"


def test_it_grants_the_id_of_another_users_deleted_session_without_its_history(
    owner_client, other_client, session_id
):
    say(owner_client, session_id, "My card ends 4242.")
    assert owner_client.delete(f"/api/sessions/{session_id}").status_code == 204

    taken = create(other_client, session_id, title="Tea")
    fresh = create(other_client, "glove_nobody_has_this", title="Tea")

    assert shape(taken) == shape(fresh)
    assert texts(other_client, session_id) == []
    # Its live stream is new: nothing of the deleted session can be replayed to them.
    mine = Session.objects.get(owner__username="other", key=session_id)
    events = LiveEvent.objects.filter(stream=session_stream(mine.id))
    assert set(events.values_list("type", flat=True)) == {"session.updated"}
    assert mine.id != session_id


def test_it_keeps_two_users_sessions_under_one_id_apart(owner_client, other_client, shared_id):
    say(other_client, shared_id, "A pot of Darjeeling.")

    assert texts(owner_client, shared_id) == ["My card ends 4242."]
    assert texts(other_client, shared_id) == ["A pot of Darjeeling."]
    assert owner_client.get(f"/api/sessions/{shared_id}").json()["title"] == "Coffee"
    assert other_client.get(f"/api/sessions/{shared_id}").json()["title"] == "Tea"
    assert [s["sessionId"] for s in other_client.get("/api/sessions").json()] == [shared_id]
    assert [s["sessionId"] for s in owner_client.get("/api/sessions").json()] == [shared_id]


def test_it_keeps_every_store_route_of_a_shared_id_to_its_caller(
    owner_client, other_client, shared_id
):
    base = f"/api/sessions/{shared_id}"
    other_client.post(f"{base}/tokens", {"tokens_in": 7, "tokens_out": 3}, format="json")
    other_client.post(f"{base}/turns")
    other_client.put(
        f"{base}/tasks",
        {"tasks": [{"id": "t1", "content": "Brew", "activeForm": "Brewing", "status": "pending"}]},
        format="json",
    )
    other_client.post(f"{base}/tasks/t1", {"updates": {"status": "completed"}}, format="json")
    other_client.put(
        f"{base}/permissions", {"toolName": "checkout", "status": "granted"}, format="json"
    )
    other_client.patch(base, {"title": "Green tea"}, format="json")

    assert other_client.get(f"{base}/tokens").json()["token_count"] == 10
    assert other_client.get(f"{base}/turns").json() == {"turn_count": 1}
    assert other_client.get(f"{base}/tasks").json()[0]["status"] == "completed"
    assert other_client.get(f"{base}/permissions?toolName=checkout").json() == {"status": "granted"}
    # The owner's session of that id saw none of it.
    assert owner_client.get(f"{base}/tokens").json()["token_count"] == 0
    assert owner_client.get(f"{base}/turns").json() == {"turn_count": 0}
    assert owner_client.get(f"{base}/tasks").json() == []
    assert owner_client.get(f"{base}/permissions?toolName=checkout").json() == {"status": "unset"}
    assert owner_client.get(base).json()["title"] == "Coffee"

    # Resetting and deleting theirs leaves the owner's alone.
    owner_client.post(f"{base}/tokens", {"tokens_in": 1, "tokens_out": 1}, format="json")
    assert other_client.post(f"{base}/reset-counters").status_code == 200
    assert other_client.post(f"{base}/cancel").json() == {"cancelled": False}
    assert other_client.delete(base).status_code == 204
    assert owner_client.get(f"{base}/tokens").json()["token_count"] == 2
    assert texts(owner_client, shared_id) == ["My card ends 4242."]
    assert other_client.get(base).status_code == 404


def test_it_still_refuses_an_owners_own_duplicate_with_409(owner_client, session_id):
    again = create(owner_client, session_id)

    assert again.status_code == 409
    assert again.json()["code"] == "duplicate_session"
    assert again.json()["field"] == "sessionId"
    assert again.json()["error"] == f'You already have, or had, a session with id "{session_id}".'


def test_it_never_gives_an_owner_their_own_deleted_id_again(owner_client, other_client, shared_id):
    # Both users deleted their session of that id: neither gets it back, whoever's it was.
    for client in (owner_client, other_client):
        assert client.delete(f"/api/sessions/{shared_id}").status_code == 204
        again = create(client, shared_id)
        assert again.status_code == 409
        assert again.json()["code"] == "duplicate_session"


def test_it_shows_staff_the_global_id_of_a_session_created_under_a_taken_one(
    other_client, shared_id
):
    theirs = Session.objects.get(owner__username="other")
    assert theirs.key == shared_id
    assert theirs.id != shared_id
    assert theirs.id.startswith("glove_")


def test_it_signs_a_chat_url_with_the_owners_own_id(other_client, anon_client, shared_id):
    minted = other_client.post(f"/api/sessions/{shared_id}/chat-url").json()
    token = minted["path"].rsplit("/", 1)[1]

    # A signed value is readable: it must hold nothing the caller did not choose.
    assert signing.loads(token, salt=SALT)["s"] == shared_id
    chat = {"systemPrompt": "", "messages": [{"sender": "user", "text": "Hi"}], "tools": []}
    assert anon_client.post(minted["path"], chat, format="json").status_code == 200


def test_it_never_lets_a_user_take_a_mesh_agents_inbox(other_client):
    # A mesh agent's inbox is the session `mesh:<agent id>`, made the first time the agent
    # runs; a user who asked for that id first must not end up holding it.
    inbox = mesh_session_id("roastery")
    assert inbox.startswith(SERVER_ID_PREFIXES)
    assert create(other_client, inbox).status_code == 201

    inbox_item_add(
        session_id=inbox,
        item=CoreInboxItem(
            id="inbox_1_mesh", tag="mesh:message", request="Kenya AA for Olive?", status="resolved"
        ),
        resolved_by="mesh",
    )

    assert other_client.get(f"/api/sessions/{inbox}/inbox").json() == []
    assert Session.objects.get(pk=inbox).owner is None


# -- inbox items ------------------------------------------------------------------------------


@pytest.fixture
def other_session(other_client) -> str:
    response = create(other_client, "glove_other_1", title="Tea")
    assert response.status_code == 201
    return "glove_other_1"


def test_it_grants_another_sessions_item_id_exactly_like_a_fresh_one(
    owner_client, other_client, session_id, other_session
):
    assert (
        owner_client.post(
            f"/api/sessions/{session_id}/inbox", item("inbox_1_kenya"), format="json"
        ).status_code
        == 201
    )

    taken = other_client.post(
        f"/api/sessions/{other_session}/inbox", item("inbox_1_kenya", "Mine"), format="json"
    )
    fresh = other_client.post(
        f"/api/sessions/{other_session}/inbox", item("inbox_2_fresh", "Mine"), format="json"
    )

    assert (
        (taken.status_code, taken.json())
        == (fresh.status_code, fresh.json())
        == (
            201,
            {"ok": True},
        )
    )
    listed = other_client.get(f"/api/sessions/{other_session}/inbox").json()
    assert [(i["id"], i["request"]) for i in listed] == [
        ("inbox_1_kenya", "Mine"),
        ("inbox_2_fresh", "Mine"),
    ]
    owners = owner_client.get(f"/api/sessions/{session_id}/inbox").json()
    assert [(i["id"], i["request"]) for i in owners] == [
        ("inbox_1_kenya", "Tell me when Kenya AA is back.")
    ]


def test_it_still_refuses_a_duplicate_item_id_within_a_session_with_409(
    other_client, other_session
):
    url = f"/api/sessions/{other_session}/inbox"
    assert other_client.post(url, item("inbox_1_kenya"), format="json").status_code == 201

    again = other_client.post(url, item("inbox_1_kenya"), format="json")

    assert again.status_code == 409
    assert again.json()["code"] == "duplicate_inbox_item"


def test_it_lets_resolvers_name_items_by_their_global_id(
    owner_client, other_client, staff_client, session_id, other_session
):
    owner_client.post(f"/api/sessions/{session_id}/inbox", item("inbox_1_kenya"), format="json")
    other_client.post(
        f"/api/sessions/{other_session}/inbox", item("inbox_1_kenya", "Mine"), format="json"
    )
    theirs = InboxItem.objects.get(session__owner__username="other")
    assert theirs.key == "inbox_1_kenya" and theirs.id != "inbox_1_kenya"

    # The id the owner's agent chose names the owner's item; the other one has its own.
    staff_client.post(
        "/api/inbox/resolve", {"itemId": "inbox_1_kenya", "response": "Back!"}, format="json"
    )
    inbox_item_resolve(item_id=theirs.id, response="Back for you too.", resolved_by="command")

    owners = owner_client.get(f"/api/sessions/{session_id}/inbox/resolved").json()
    assert [(i["id"], i["response"]) for i in owners] == [("inbox_1_kenya", "Back!")]
    others = other_client.get(f"/api/sessions/{other_session}/inbox/resolved").json()
    assert [(i["id"], i["response"]) for i in others] == [("inbox_1_kenya", "Back for you too.")]

    # The session's own side speaks its key: consuming it over REST, and its live event.
    consumed = other_client.post(
        f"/api/sessions/{other_session}/inbox/update",
        {"itemId": "inbox_1_kenya", "updates": {"status": "consumed"}},
        format="json",
    )
    assert consumed.json() == {"ok": True}
    assert InboxItem.objects.get(pk=theirs.id).status == "consumed"
    assert InboxItem.objects.get(pk="inbox_1_kenya").status == "resolved"
    changed = LiveEvent.objects.filter(stream=session_stream(theirs.session_id)).last()
    assert changed.payload["item"]["id"] == "inbox_1_kenya"
