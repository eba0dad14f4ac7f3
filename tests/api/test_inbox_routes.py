"""The inbox routes of Glove's coffee example, with guarded transitions and 409s.

Resolving over these routes is a staff caller's (a service account); what a plain owner
may not do is in test_inbox_authority.py.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def item(item_id: str = "inbox_1_abc", **extra) -> dict:
    return {
        "id": item_id,
        "tag": "restock_watch",
        "request": "Tell me when Yirgacheffe is back",
        "response": None,
        "status": "pending",
        "blocking": False,
        "created_at": "2026-05-25T18:22:14.123Z",
        "resolved_at": None,
        **extra,
    }


def inbox(session_id: str, tail: str = "") -> str:
    return f"/api/sessions/{session_id}/inbox{tail}"


@pytest.fixture
def staff_client(owner, owner_client):
    """The session's owner as a staff user (token auth reloads the user on every request)."""
    owner.is_staff = True
    owner.save(update_fields=["is_staff"])
    return owner_client


def test_it_adds_and_lists_inbox_items(owner_client, session_id):
    response = owner_client.post(inbox(session_id), {"item": item()}, format="json")
    assert response.status_code == 201
    assert owner_client.get(inbox(session_id)).json() == [item()]


def test_it_refuses_a_duplicate_item_id_with_409(owner_client, session_id):
    owner_client.post(inbox(session_id), {"item": item()}, format="json")
    response = owner_client.post(inbox(session_id), {"item": item()}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "duplicate_inbox_item"
    assert len(owner_client.get(inbox(session_id)).json()) == 1


def test_it_refuses_a_malformed_item_naming_the_field(owner_client, session_id):
    response = owner_client.post(
        inbox(session_id), {"item": item(created_at="yesterday")}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "item.created_at"
    assert owner_client.get(inbox(session_id)).json() == []


def test_it_resolves_then_lists_the_item_as_resolved(staff_client, session_id):
    staff_client.post(inbox(session_id), {"item": item()}, format="json")
    updates = {
        "status": "resolved",
        "response": "Back in stock",
        "resolved_at": "2026-05-26T09:00:00.000Z",
    }
    response = staff_client.post(
        inbox(session_id, "/update"), {"itemId": "inbox_1_abc", "updates": updates}, format="json"
    )
    assert response.status_code == 200
    resolved = staff_client.get(inbox(session_id, "/resolved")).json()
    assert [(i["id"], i["status"], i["response"]) for i in resolved] == [
        ("inbox_1_abc", "resolved", "Back in stock")
    ]


def test_it_never_resurrects_a_consumed_item(staff_client, session_id):
    staff_client.post(inbox(session_id), {"item": item()}, format="json")
    update = inbox(session_id, "/update")
    staff_client.post(
        update,
        {"itemId": "inbox_1_abc", "updates": {"status": "resolved", "response": "ok"}},
        format="json",
    )
    consumed = staff_client.post(
        update, {"itemId": "inbox_1_abc", "updates": {"status": "consumed"}}, format="json"
    )
    assert consumed.status_code == 200

    again = staff_client.post(
        update,
        {"itemId": "inbox_1_abc", "updates": {"status": "resolved", "response": "x"}},
        format="json",
    )
    assert again.status_code == 409
    assert again.json()["code"] == "inbox_transition"
    assert "already consumed" in again.json()["error"]
    assert staff_client.get(inbox(session_id, "/resolved")).json() == []


def test_it_refuses_a_second_resolution(staff_client, session_id):
    staff_client.post(inbox(session_id), {"item": item()}, format="json")
    update = inbox(session_id, "/update")
    body = {"itemId": "inbox_1_abc", "updates": {"status": "resolved", "response": "ok"}}
    assert staff_client.post(update, body, format="json").status_code == 200
    second = staff_client.post(update, body, format="json")
    assert second.status_code == 409
    assert "already resolved" in second.json()["error"]


def test_it_answers_404_for_an_unknown_item(owner_client, session_id):
    response = owner_client.post(
        inbox(session_id, "/update"),
        {"itemId": "inbox_nope", "updates": {"status": "consumed"}},
        format="json",
    )
    assert response.status_code == 404
    assert response.json()["code"] == "inbox_item_not_found"


def test_it_refuses_unknown_update_fields(owner_client, session_id):
    owner_client.post(inbox(session_id), {"item": item()}, format="json")
    response = owner_client.post(
        inbox(session_id, "/update"),
        {"itemId": "inbox_1_abc", "updates": {"tag": "x"}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "updates.tag"


def test_it_cannot_update_an_item_of_another_users_session(owner_client, other_client, session_id):
    owner_client.post(inbox(session_id), {"item": item()}, format="json")
    other_client.post("/api/sessions", {"sessionId": "glove_theirs"}, format="json")
    response = other_client.post(
        inbox("glove_theirs", "/update"),
        {"itemId": "inbox_1_abc", "updates": {"status": "consumed"}},
        format="json",
    )
    assert response.status_code == 404
    assert owner_client.get(inbox(session_id)).json()[0]["status"] == "pending"


def test_it_consumes_resolved_items_exactly_once(staff_client, session_id):
    staff_client.post(inbox(session_id), {"item": item()}, format="json")
    staff_client.post(
        inbox(session_id, "/update"),
        {"itemId": "inbox_1_abc", "updates": {"status": "resolved", "response": "ok"}},
        format="json",
    )
    first = staff_client.post(inbox(session_id, "/consume")).json()
    second = staff_client.post(inbox(session_id, "/consume")).json()
    assert [i["id"] for i in first] == ["inbox_1_abc"]
    assert second == []
    assert staff_client.get(inbox(session_id)).json()[0]["status"] == "consumed"
