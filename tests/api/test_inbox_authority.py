"""Who may answer an inbox item over the session routes: not the session's owner.

A customer's REST token reaches its own sessions' inbox routes. It may add what its agent
posts (pending, unanswered) and mark a resolved item consumed, as a glove-react client's
agent loop does; resolving, answering, or rewriting an answer is staff's (the staff REST
endpoint, the admin, a signed webhook) and is refused with a 403 that changes nothing.
"""

from __future__ import annotations

import pytest

from gloveapp.live.models import LiveEvent
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve, inbox_items_consume_resolved

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def item(item_id: str = "inbox_1_abc", **extra) -> dict:
    return {
        "id": item_id,
        "tag": "refund_approval",
        "request": "May I refund order #1042?",
        "response": None,
        "status": "pending",
        "blocking": True,
        "created_at": "2026-05-25T18:22:14.123Z",
        "resolved_at": None,
        **extra,
    }


def inbox(session_id: str, tail: str = "") -> str:
    return f"/api/sessions/{session_id}/inbox{tail}"


def rows() -> list[dict]:
    return list(InboxItem.objects.order_by("pk").values())


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("barista", is_staff=True)


@pytest.fixture
def pending(owner_client, session_id) -> str:
    response = owner_client.post(inbox(session_id), {"item": item()}, format="json")
    assert response.status_code == 201, response.json()
    return "inbox_1_abc"


@pytest.fixture
def resolved(pending, staff) -> str:
    inbox_item_resolve(item_id=pending, response="Refund DENIED", resolved_by="user", user=staff)
    return pending


@pytest.fixture
def consumed(resolved, session_id) -> str:
    inbox_items_consume_resolved(session_id=session_id)
    return resolved


def update(client, session_id: str, updates: dict):
    return client.post(
        inbox(session_id, "/update"), {"itemId": "inbox_1_abc", "updates": updates}, format="json"
    )


def assert_refused(response, *words: str) -> None:
    assert response.status_code == 403, response.json()
    body = response.json()
    assert body["code"] == "inbox_resolution_forbidden"
    assert "/api/inbox/resolve" in body["error"]
    for word in words:
        assert word in body["error"]


def test_it_refuses_an_owner_resolving_a_pending_item(owner_client, session_id, pending):
    before, events = rows(), LiveEvent.objects.count()

    response = update(
        owner_client, session_id, {"status": "resolved", "response": "Approved by manager"}
    )

    assert_refused(response, "response")
    assert rows() == before
    assert LiveEvent.objects.count() == events


def test_it_refuses_an_owner_resolving_without_a_response(owner_client, session_id, pending):
    before = rows()

    assert_refused(update(owner_client, session_id, {"status": "resolved"}), "'resolved'")
    assert rows() == before


def test_it_refuses_an_owner_answering_a_pending_item_without_resolving_it(
    owner_client, session_id, pending
):
    before = rows()

    assert_refused(update(owner_client, session_id, {"response": "hello"}), "response")
    assert_refused(
        update(owner_client, session_id, {"resolved_at": "2026-05-26T09:00:00.000Z"}),
        "resolved_at",
    )
    assert rows() == before


def test_it_refuses_an_owner_rewriting_a_delivered_answer(owner_client, session_id, consumed):
    before = rows()

    response = update(owner_client, session_id, {"response": "Refund APPROVED by staff"})

    assert_refused(response, "response")
    assert rows() == before
    stored = InboxItem.objects.get(pk=consumed)
    assert (stored.response, stored.resolved_by_user.username) == ("Refund DENIED", "barista")


def test_it_refuses_an_owner_rewriting_an_answer_while_consuming(
    owner_client, session_id, resolved
):
    before = rows()

    response = update(owner_client, session_id, {"status": "consumed", "response": "APPROVED"})

    assert_refused(response, "response")
    assert rows() == before


def test_it_lets_an_owner_withdraw_a_pending_item_but_not_answer_it(
    owner_client, session_id, pending
):
    before = rows()
    assert_refused(
        update(owner_client, session_id, {"status": "consumed", "response": "Send failed"}),
        "response",
    )
    assert rows() == before

    response = update(owner_client, session_id, {"status": "consumed"})

    assert response.status_code == 200, response.json()
    stored = InboxItem.objects.get(pk=pending)
    assert (stored.status, stored.response, stored.resolved_at) == ("consumed", None, None)
    assert owner_client.post(inbox(session_id, "/consume")).json() == []


def test_it_answers_409_not_403_for_a_transition_nobody_may_make(
    owner_client, session_id, consumed
):
    response = update(owner_client, session_id, {"status": "resolved", "response": "x"})

    assert response.status_code == 409
    assert "already consumed" in response.json()["error"]


def test_it_lets_an_owner_consume_a_resolved_item(owner_client, session_id, resolved):
    response = update(owner_client, session_id, {"status": "consumed"})

    assert response.status_code == 200, response.json()
    stored = InboxItem.objects.get(pk=resolved)
    assert (stored.status, stored.response, stored.resolved_by_user.username) == (
        "consumed",
        "Refund DENIED",
        "barista",
    )


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"status": "resolved", "response": "Approved by manager"}, "item.status"),
        ({"status": "consumed"}, "item.status"),
        ({"response": "Approved by manager"}, "item.response"),
        ({"resolved_at": "2026-05-26T09:00:00.000Z"}, "item.resolved_at"),
    ],
)
def test_it_refuses_an_owner_adding_an_answered_item(owner_client, session_id, extra, field):
    response = owner_client.post(inbox(session_id), {"item": item(**extra)}, format="json")

    assert_refused(response)
    assert response.json()["field"] == field
    assert rows() == []
    assert owner_client.post(inbox(session_id, "/consume")).json() == []


def test_it_lets_staff_add_an_item_that_arrives_resolved(owner, owner_client, session_id):
    owner.is_staff = True
    owner.save()
    answered = item(status="resolved", response="hello B", resolved_at="2026-05-26T09:00:00.000Z")

    response = owner_client.post(inbox(session_id), {"item": answered}, format="json")

    assert response.status_code == 201, response.json()
    assert [i["response"] for i in owner_client.get(inbox(session_id, "/resolved")).json()] == [
        "hello B"
    ]


def test_it_lets_staff_resolve_but_never_rewrite_an_answer(
    owner, owner_client, session_id, resolved
):
    owner.is_staff = True
    owner.save()
    before = rows()

    response = update(owner_client, session_id, {"response": "rewritten"})

    assert response.status_code == 400, response.json()
    assert "leaves pending" in response.json()["error"]
    assert rows() == before
