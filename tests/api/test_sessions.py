"""`/api/sessions`: a caller creates, lists, renames and deletes only its own sessions."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_it_creates_a_session_owned_by_the_caller(owner_client):
    response = owner_client.post(
        "/api/sessions",
        {"sessionId": "glove_abc", "title": "Coffee", "agentName": "coffee"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["sessionId"] == "glove_abc"
    assert body["title"] == body["name"] == "Coffee"
    assert body["agentName"] == "coffee"
    assert body["tokenCount"] == 0 and body["turnCount"] == 0


def test_it_mints_an_id_when_none_is_given(owner_client):
    response = owner_client.post("/api/sessions", {}, format="json")
    assert response.status_code == 201
    assert response.json()["sessionId"]


def test_it_refuses_a_duplicate_session_id_with_409(owner_client, other_client, session_id):
    again = owner_client.post("/api/sessions", {"sessionId": session_id}, format="json")
    assert again.status_code == 409
    assert again.json()["field"] == "sessionId"
    # Ids are per owner: another user gets the id as if nobody had it, and learns nothing
    # (tests/api/test_id_namespaces.py).
    theirs = other_client.post("/api/sessions", {"sessionId": session_id}, format="json")
    assert theirs.status_code == 201


def test_it_refuses_a_session_id_that_cannot_sit_in_a_url(owner_client):
    response = owner_client.post("/api/sessions", {"sessionId": "a/b"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "sessionId"


def test_it_lists_only_the_callers_sessions_newest_first(owner_client, other_client):
    for sid in ("glove_first", "glove_second"):
        owner_client.post("/api/sessions", {"sessionId": sid}, format="json")
    other_client.post("/api/sessions", {"sessionId": "glove_theirs"}, format="json")

    ids = [s["sessionId"] for s in owner_client.get("/api/sessions").json()]
    assert ids == ["glove_second", "glove_first"]
    assert [s["sessionId"] for s in other_client.get("/api/sessions").json()] == ["glove_theirs"]


def test_it_renames_a_session_with_title_or_coffees_name(owner_client, session_id):
    assert owner_client.patch(
        f"/api/sessions/{session_id}", {"title": "Espresso"}, format="json"
    ).json() == {"ok": True}
    assert owner_client.get(f"/api/sessions/{session_id}").json()["title"] == "Espresso"

    owner_client.patch(f"/api/sessions/{session_id}", {"name": "Latte"}, format="json")
    assert owner_client.get(f"/api/sessions/{session_id}").json()["title"] == "Latte"


def test_it_refuses_a_rename_without_a_title(owner_client, session_id):
    response = owner_client.patch(f"/api/sessions/{session_id}", {}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "title"


def test_it_deletes_a_session(owner_client, session_id):
    assert owner_client.delete(f"/api/sessions/{session_id}").status_code == 204
    assert owner_client.get(f"/api/sessions/{session_id}").status_code == 404


def test_it_hides_a_session_from_another_user(other_client, owner_client, session_id):
    assert other_client.get(f"/api/sessions/{session_id}").status_code == 404
    assert (
        other_client.patch(f"/api/sessions/{session_id}", {"title": "x"}, format="json").status_code
        == 404
    )
    assert other_client.delete(f"/api/sessions/{session_id}").status_code == 404
    assert owner_client.get(f"/api/sessions/{session_id}").json()["title"] == "Coffee"


def test_it_does_not_create_a_session_on_get(owner_client):
    assert owner_client.get("/api/sessions/glove_unknown/messages").status_code == 404
    assert owner_client.get("/api/sessions/glove_unknown").status_code == 404


def test_it_refuses_an_anonymous_caller(anon_client):
    response = anon_client.get("/api/sessions")
    assert response.status_code == 401
    assert "error" in response.json()


def test_it_refuses_to_recreate_a_deleted_sessions_id_with_409(
    owner_client, other_client, session_id
):
    owner_client.post(
        f"/api/sessions/{session_id}/messages",
        {"messages": [{"sender": "user", "text": "my card ends 4242"}]},
        format="json",
    )
    assert owner_client.delete(f"/api/sessions/{session_id}").status_code == 204

    # The owner never gets a deleted id back; another user gets it, with none of its history
    # (the id's event log outlives the session, on a stream their session does not share).
    again = owner_client.post("/api/sessions", {"sessionId": session_id}, format="json")
    assert again.status_code == 409
    assert again.json()["field"] == "sessionId"
    assert again.json()["error"] == f'You already have, or had, a session with id "{session_id}".'
    theirs = other_client.post("/api/sessions", {"sessionId": session_id}, format="json")
    assert theirs.status_code == 201
    assert other_client.get(f"/api/sessions/{session_id}/messages").json() == []


def test_it_retires_the_ids_of_a_deleted_sessions_subagents(owner_client, session_id):
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_child
    from gloveapp.live.models import LiveEvent

    parent = Session.objects.get(key=session_id)
    child, _ = session_child(parent_id=parent.pk, call_id="call_1", agent_name="researcher")
    grandchild, _ = session_child(parent_id=child.pk, call_id="call_2", agent_name="reader")

    assert owner_client.delete(f"/api/sessions/{session_id}").status_code == 204

    assert not Session.objects.filter(pk__in=[child.pk, grandchild.pk]).exists()
    for gone in (child, grandchild):
        # Its owner never gets the id back, and anyone watching its stream is told.
        again = owner_client.post("/api/sessions", {"sessionId": gone.key}, format="json")
        assert again.status_code == 409
        assert LiveEvent.objects.filter(
            stream=f"session:{gone.pk}", type="session.deleted"
        ).exists()


@pytest.fixture
def subagent_ids(session_id) -> tuple[str, str]:
    """A subagent session of the owner's session and one of its own (as a delegation
    creates them, `services.session_child`): their ids as the owner sees them."""
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_child

    parent = Session.objects.get(key=session_id)
    child, _ = session_child(parent_id=parent.pk, call_id="call_1", agent_name="researcher")
    grandchild, _ = session_child(parent_id=child.pk, call_id="call_2", agent_name="reader")
    return child.key, grandchild.key


def test_it_lists_subagent_sessions_with_their_parent(owner_client, session_id, subagent_ids):
    child, grandchild = subagent_ids

    listed = {s["sessionId"]: s for s in owner_client.get("/api/sessions").json()}

    # The list keeps every session it always sent; each now says who delegated it.
    assert set(listed) == {session_id, child, grandchild}
    assert listed[session_id]["parentSessionId"] is None
    assert listed[child]["parentSessionId"] == session_id
    assert listed[grandchild]["parentSessionId"] == child


def test_it_names_the_parent_in_the_detail_and_on_create(owner_client, session_id, subagent_ids):
    child, _ = subagent_ids

    assert owner_client.get(f"/api/sessions/{child}").json()["parentSessionId"] == session_id
    assert owner_client.get(f"/api/sessions/{session_id}").json()["parentSessionId"] is None
    created = owner_client.post("/api/sessions", {"sessionId": "glove_new"}, format="json")
    assert created.json()["parentSessionId"] is None


def test_it_lists_one_sessions_subagents_with_parent(owner_client, session_id, subagent_ids):
    child, grandchild = subagent_ids

    under_parent = owner_client.get("/api/sessions", {"parent": session_id}).json()
    under_child = owner_client.get("/api/sessions", {"parent": child}).json()

    assert [s["sessionId"] for s in under_parent] == [child]
    assert [s["sessionId"] for s in under_child] == [grandchild]
    assert owner_client.get("/api/sessions", {"parent": grandchild}).json() == []


def test_it_lists_only_top_level_sessions_as_the_chat_list_does(
    owner_client, session_id, subagent_ids
):
    listed = owner_client.get("/api/sessions", {"topLevel": "true"}).json()

    assert [s["sessionId"] for s in listed] == [session_id]


def test_it_answers_a_parent_that_is_not_the_callers_like_a_missing_one(
    owner_client, other_client, session_id, subagent_ids
):
    theirs = other_client.get("/api/sessions", {"parent": session_id})
    missing = other_client.get("/api/sessions", {"parent": "glove_nobody"})

    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()


def test_it_refuses_parent_and_top_level_together_naming_the_field(owner_client, session_id):
    response = owner_client.get("/api/sessions", {"parent": session_id, "topLevel": "true"})

    assert response.status_code == 400
    assert response.json()["field"] == "topLevel"
