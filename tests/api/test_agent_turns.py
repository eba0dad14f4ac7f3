"""Starting a turn of the server's agent over REST, reading its state, and who may do so
(issue 33). The stream, slots answered mid-turn and the clients: test_agent_client.py."""

from __future__ import annotations

import pytest

from gloveapp.conversations.services import session_create
from gloveapp.turns.models import Turn
from tests.helpers import connection_cut_after_commit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _start(client, session_id: str, text: str = "Do you have Kenya AA?", **headers):
    return client.post(
        f"/api/sessions/{session_id}/agent/turns", {"text": text}, format="json", **headers
    )


def test_it_queues_a_turn_and_says_where_to_stream_it(owner_client, session_id):
    response = _start(owner_client, session_id)
    assert response.status_code == 202
    body = response.json()
    turn = Turn.objects.get()
    assert body["turnId"] == turn.pk and body["state"] == "queued" and body["ahead"] == 0
    assert turn.source == "api" and turn.text == "Do you have Kenya AA?"
    assert body["streamUrl"] == (
        f"/api/sessions/{session_id}/events?last_event_id={body['lastEventId']}"
    )
    state = owner_client.get(body["turnUrl"])
    assert state.status_code == 200
    assert state.json()["state"] == "queued" and state.json()["turnId"] == turn.pk


def test_a_retried_start_with_the_same_key_starts_one_turn(owner_client, session_id):
    first = _start(owner_client, session_id, HTTP_IDEMPOTENCY_KEY="start-1")
    again = _start(owner_client, session_id, HTTP_IDEMPOTENCY_KEY="start-1")
    assert first.status_code == again.status_code == 202
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["turnId"] == first.json()["turnId"]
    assert Turn.objects.count() == 1
    other = _start(owner_client, session_id, "another message", HTTP_IDEMPOTENCY_KEY="start-1")
    assert other.status_code == 422


def test_a_start_over_the_queue_bound_is_a_429_with_retry_after(owner_client, session_id, settings):
    settings.GLOVE_MAX_QUEUED_MESSAGES = 2
    assert [_start(owner_client, session_id).status_code for _ in range(2)] == [202, 202]
    refused = _start(owner_client, session_id, HTTP_IDEMPOTENCY_KEY="over")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "waiting for this chat" in refused.json()["error"]
    assert Turn.objects.count() == 2
    # The refusal kept no claim on the key: its retry, once there is room, is tried afresh.
    Turn.objects.update(status="done")
    assert _start(owner_client, session_id, HTTP_IDEMPOTENCY_KEY="over").status_code == 202


def test_a_start_past_the_users_turn_limit_is_a_429(owner_client, session_id, settings):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 1
    assert _start(owner_client, session_id).status_code == 202
    refused = _start(owner_client, session_id)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_it_refuses_a_message_that_is_empty_or_unstorable(owner_client, session_id):
    for text in ("", "   ", "a\x00b", "x" * 20_001):
        response = _start(owner_client, session_id, text)
        assert response.status_code == 400, text
        assert response.json()["field"] == "text"
    assert not Turn.objects.exists()


def test_it_refuses_a_turn_with_an_agent_the_caller_may_not_use(owner, owner_client):
    session = session_create(owner=owner, agent_name="roastery", session_id="glove_supplier")
    response = _start(owner_client, session.key)
    assert response.status_code == 400 and response.json()["field"] == "agentName"
    assert not Turn.objects.exists()


def test_another_users_session_is_a_404_on_every_route(other_client, owner_client, session_id):
    turn_id = _start(owner_client, session_id).json()["turnId"]
    base = f"/api/sessions/{session_id}"
    missing = "/api/sessions/glove_nobody_has_this"
    for prefix in (base, missing):
        answers = [
            _start(other_client, prefix.rsplit("/", 1)[1]),
            other_client.get(f"{prefix}/agent/turns/{turn_id}"),
            other_client.get(f"{prefix}/slots"),
            other_client.post(f"{prefix}/slots/t{turn_id}-slot_1", {"value": 1}, format="json"),
            other_client.get(f"{prefix}/events"),
            other_client.post(f"{prefix}/cancel"),
            other_client.get(f"{prefix}/permission-prompts"),
            other_client.post(
                f"{prefix}/permission-prompts/t{turn_id}-slot_1", {"value": "once"}, format="json"
            ),
            other_client.post(
                f"{prefix}/slots/t{turn_id}-slot_1", {"dismiss": True}, format="json"
            ),
        ]
        assert [answer.status_code for answer in answers] == [404] * len(answers), prefix
        assert {answer.json()["error"] for answer in answers} <= {
            "Session not found.",
            "Not found.",
        }
    assert Turn.objects.count() == 1


def test_a_turn_of_another_session_reads_as_missing(owner, owner_client, session_id):
    theirs = session_create(owner=owner, agent_name="coffee", session_id="glove_second")
    turn_id = _start(owner_client, session_id).json()["turnId"]
    assert owner_client.get(f"/api/sessions/{theirs.key}/agent/turns/{turn_id}").status_code == 404
    for junk in ("x", "-1", "9" * 40, "\uff11"):
        assert owner_client.get(f"/api/sessions/{session_id}/agent/turns/{junk}").status_code == 404


def test_staff_read_along_but_do_not_start_turns(
    owner_client, session_id, other_user, other_client
):
    turn_id = _start(owner_client, session_id).json()["turnId"]
    other_user.is_staff = True
    other_user.save()
    global_id = Turn.objects.get().session_id
    assert other_client.get(f"/api/sessions/{global_id}/agent/turns/{turn_id}").status_code == 200
    assert other_client.get(f"/api/sessions/{global_id}/slots").json() == []
    assert _start(other_client, global_id).status_code == 404


def test_the_event_stream_wants_a_caller_and_a_well_formed_cursor(
    anon_client, owner_client, session_id
):
    assert anon_client.get(f"/api/sessions/{session_id}/events").status_code == 401
    bad_token = anon_client.get(
        f"/api/sessions/{session_id}/events", HTTP_AUTHORIZATION="Token nope"
    )
    assert bad_token.status_code == 401
    for cursor in ("x", "-3", "1.5", "9" * 40):
        refused = owner_client.get(f"/api/sessions/{session_id}/events", HTTP_LAST_EVENT_ID=cursor)
        assert refused.status_code == 400
        assert refused.json()["field"] == "Last-Event-ID"
    assert owner_client.post(f"/api/sessions/{session_id}/events").status_code == 405
    # A WSGI server (the test client is one) would hold a thread per open stream: it says
    # the ASGI server serves it (tests/api/test_agent_client.py reads the stream there).
    assert owner_client.get(f"/api/sessions/{session_id}/events").status_code == 421


def test_every_new_route_is_in_the_openapi_schema(owner_client):
    schema = owner_client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for route, method in [
        ("/api/sessions/{session_id}/agent/turns", "post"),
        ("/api/sessions/{session_id}/agent/turns/{turn_id}", "get"),
        ("/api/sessions/{session_id}/events", "get"),
        ("/api/sessions/{session_id}/slots", "get"),
        ("/api/sessions/{session_id}/slots/{slot_id}", "post"),
    ]:
        assert method in paths[route], route
    stream = paths["/api/sessions/{session_id}/events"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert schema["components"]["schemas"]["LiveFrame"]["properties"]["type"]["$ref"]
    events = set(schema["components"]["schemas"]["LiveFrameTypeEnum"]["enum"])
    assert {"turn.finished", "slot.pushed", "inbox.changed", "text_delta", "resync"} <= events


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("requires_postgres")
def test_a_start_whose_turn_committed_is_a_202_though_the_database_went_away_then(
    owner_client, session_id
):
    # A 503 would say "nothing was done, send it again", and the client's second send would
    # queue the same message twice (seen under a PostgreSQL restart, tests/handoff/test_load.py).
    with connection_cut_after_commit("turns_turn") as cut:
        response = _start(owner_client, session_id)
    assert cut, "the connection was never cut after the turn's commit"
    assert response.status_code == 202, response.content
    body = response.json()
    (turn,) = Turn.objects.all()
    assert body["turnId"] == turn.pk and body["state"] == "queued"
    assert body["text"] == turn.text and body["reply"] is None
    assert body["streamUrl"].endswith(f"?last_event_id={body['lastEventId']}")
