"""Glove message fields over HTTP: unknown ones kept verbatim, known ones still checked."""

from __future__ import annotations

import pytest

from gloveapp.core.input_rules import MAX_EXTRA_BYTES, MAX_EXTRA_DEPTH
from tests.contract.test_message_fields import (
    GLOVE_4_1_0_AGENT_MESSAGE,
    GLOVE_4_1_0_USER_MESSAGE,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def messages_url(session_id: str) -> str:
    return f"/api/sessions/{session_id}/messages"


def post(client, session_id, *messages):
    return client.post(messages_url(session_id), {"messages": list(messages)}, format="json")


def test_it_returns_every_field_glove_core_4_1_0_writes_and_unknown_ones(owner_client, session_id):
    sent = [GLOVE_4_1_0_USER_MESSAGE, GLOVE_4_1_0_AGENT_MESSAGE]
    assert post(owner_client, session_id, *sent).status_code == 200
    assert owner_client.get(messages_url(session_id)).json() == sent


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"sender": "agent", "text": 5}, "messages[0].text"),
        ({"sender": "agent", "text": "", "tool_calls": [{"tool_name": 3}]}, "tool_name"),
        ({"sender": "user", "text": "", "content": [{"type": "gif"}]}, "type"),
        ({"sender": "user", "text": "", "content": "not a list"}, "content"),
        (
            {"sender": "user", "text": "", "tool_results": [{"tool_name": "t", "result": {}}]},
            "status",
        ),
        ({"sender": "agent", "text": "", "reasoning_content": ["x"]}, "reasoning_content"),
    ],
)
def test_it_still_refuses_bad_types_in_known_fields(owner_client, session_id, message, field):
    response = post(owner_client, session_id, message)
    assert response.status_code == 400
    assert field in response.json()["field"]
    assert owner_client.get(messages_url(session_id)).json() == []


def nested(depth: int):
    value: object = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def test_it_refuses_unknown_fields_nested_too_deeply(owner_client, session_id):
    too_deep = {"sender": "agent", "text": "", "provider_options": nested(MAX_EXTRA_DEPTH + 1)}
    response = post(owner_client, session_id, too_deep)
    assert response.status_code == 400
    assert response.json()["field"] == "messages[0].provider_options"
    just_fits = {"sender": "agent", "text": "", "provider_options": nested(MAX_EXTRA_DEPTH)}
    assert post(owner_client, session_id, just_fits).status_code == 200


def test_it_refuses_unknown_fields_larger_than_the_limit(owner_client, session_id):
    big_call = {
        "tool_name": "t",
        "input_args": {},
        "provider_options": {"x": {"blob": "a" * MAX_EXTRA_BYTES}},
    }
    response = post(
        owner_client, session_id, {"sender": "agent", "text": "", "tool_calls": [big_call]}
    )
    assert response.status_code == 400
    assert response.json()["field"] == "messages[0].tool_calls[0].provider_options"


def test_it_refuses_unstorable_text_in_unknown_fields(owner_client, session_id):
    response = post(owner_client, session_id, {"sender": "user", "text": "", "future": "a\u0000b"})
    assert response.status_code == 400
    assert "future" in response.json()["field"]
