"""A session's turns as a paged list, and a start that waits for its turn to settle."""

from __future__ import annotations

import pytest

from gloveapp.turns.models import Turn

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _start(client, session_id: str, text: str = "Do you have Kenya AA?", query: str = ""):
    return client.post(
        f"/api/sessions/{session_id}/agent/turns{query}", {"text": text}, format="json"
    )


def test_it_lists_a_sessions_turns_newest_first_a_page_at_a_time(owner_client, session_id):
    started = [_start(owner_client, session_id, f"message {n}").json()["turnId"] for n in range(5)]
    url = f"/api/sessions/{session_id}/agent/turns?limit=2"
    seen, pages = [], 0
    while url:
        page = owner_client.get(url)
        assert page.status_code == 200
        seen += [row["turnId"] for row in page.json()]
        assert all(row["sessionId"] == session_id for row in page.json())
        pages += 1
        link = page.get("Link")
        url = link[1 : link.index(">")] if link else None
    assert seen == list(reversed(started)) and pages == 3


def test_a_cursor_of_another_list_or_a_made_up_one_is_a_400(owner_client, session_id):
    _start(owner_client, session_id)
    _start(owner_client, session_id)
    for cursor in ("nonsense", "x" * 2000):
        refused = owner_client.get(f"/api/sessions/{session_id}/agent/turns?cursor={cursor}")
        assert refused.status_code == 400 and refused.json()["field"] == "cursor"
    page = owner_client.get(f"/api/sessions/{session_id}/agent/turns?limit=1")
    cursor = page["Link"].split("cursor=")[1].split(">")[0]
    other = owner_client.get(f"/api/sessions?cursor={cursor}")
    assert other.status_code == 400 and other.json()["field"] == "cursor"


def test_another_users_turn_list_is_the_404_of_no_session(other_client, owner_client, session_id):
    _start(owner_client, session_id)
    theirs = other_client.get(f"/api/sessions/{session_id}/agent/turns")
    nobody = other_client.get("/api/sessions/glove_nobody_has_this/agent/turns")
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json() == nobody.json()


def test_a_start_that_waits_answers_202_when_the_wait_runs_out(owner_client, session_id):
    # No worker runs here: the turn stays queued, and the wait runs out.
    response = _start(owner_client, session_id, query="?wait=0.2")
    assert response.status_code == 202
    assert response.json()["state"] == "queued" and response.json()["reply"] is None


def test_a_wait_past_the_bound_or_not_a_number_is_a_400_and_starts_nothing(
    owner_client, session_id
):
    body = _start(owner_client, session_id, query="?wait=0").json()
    assert Turn.objects.get(pk=body["turnId"]).status == "queued"
    for wait in ("-1", "x", "61", "nan"):
        refused = _start(owner_client, session_id, query=f"?wait={wait}")
        assert refused.status_code == 400, wait
        assert refused.json()["field"] == "wait"
    assert Turn.objects.count() == 1
