"""Strings no database or channel layer can hold are a 400 naming the field, and write nothing.

A lone surrogate (`"\\ud800"` in a JSON body) is valid JSON but not valid UTF-8: stored, it
breaks the live relay for the whole process and every later read of the session.
"""

from __future__ import annotations

import json

import pytest

from gloveapp.conversations.models import Message
from gloveapp.live.models import LiveEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

LONE = "\\ud800"  # as it appears in a JSON body


def _post(client, path: str, body: str, method: str = "POST"):
    return client.generic(method, path, body, content_type="application/json")


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            f'{{"sender": "agent", "text": "", "tool_calls": '
            f'[{{"tool_name": "x", "input_args": {{"q": "{LONE}"}}}}]}}',
            "messages[0].tool_calls[0].input_args",
        ),
        (
            f'{{"sender": "agent", "text": "", "tool_calls": '
            f'[{{"tool_name": "x", "input_args": {{"{LONE}": 1}}}}]}}',
            "messages[0].tool_calls[0].input_args",
        ),
        (
            f'{{"sender": "agent", "text": "", "tool_results": [{{"tool_name": "x", '
            f'"result": {{"status": "success", "data": ["{LONE}"]}}}}]}}',
            "messages[0].tool_results[0].result.data",
        ),
        (f'{{"sender": "user", "text": "hi {LONE}"}}', "messages[0].text"),
    ],
)
def test_it_refuses_a_lone_surrogate_in_a_message_and_writes_nothing(
    owner_client, session_id, message, field
):
    before = LiveEvent.objects.count()

    response = _post(
        owner_client, f"/api/sessions/{session_id}/messages", f'{{"messages": [{message}]}}'
    )

    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not Message.objects.filter(session_id=session_id).exists()
    assert LiveEvent.objects.count() == before
    # The session stays readable.
    assert owner_client.get(f"/api/sessions/{session_id}/messages").status_code == 200


def test_it_still_accepts_characters_outside_the_basic_plane(owner_client, session_id):
    # A surrogate *pair* is an ordinary character (here U+1F600) and must pass.
    body = json.dumps(
        {
            "messages": [
                {
                    "sender": "user",
                    "text": "☕ 😀",
                    "tool_calls": [{"tool_name": "x", "input_args": {"q": "😀"}}],
                }
            ]
        }
    )
    response = _post(owner_client, f"/api/sessions/{session_id}/messages", body)

    assert response.status_code == 200, response.content
    stored = owner_client.get(f"/api/sessions/{session_id}/messages").json()
    assert stored[0]["tool_calls"][0]["input_args"] == {"q": "😀"}


def test_it_refuses_a_lone_surrogate_in_a_task(owner_client, session_id):
    body = f'{{"tasks": [{{"id": "t1", "content": "grind {LONE}", "activeForm": "", "status": "pending"}}]}}'
    response = _post(owner_client, f"/api/sessions/{session_id}/tasks", body, "PUT")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "tasks[0].content"
    assert owner_client.get(f"/api/sessions/{session_id}/tasks").json() == []
