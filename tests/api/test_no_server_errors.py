"""Hostile input from an authenticated caller: a 4xx naming the field, never a 500, and
nothing written. Each case here answered 500 once (issue 15)."""

from __future__ import annotations

import json

import pytest

from gloveapp.conversations.models import Message, Permission, Task
from gloveapp.live.models import LiveEvent
from inbox.models import InboxItem

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

LONE = "\\ud800"  # a lone surrogate as it appears in a JSON body


def deep(levels: int, leaf: str = "1") -> str:
    """JSON text nested `levels` deep: [[[...1...]]]."""
    return "[" * levels + leaf + "]" * levels


def _send(client, method: str, path: str, body: str):
    return client.generic(method, path, body, content_type="application/json")


def _written(session_id: str) -> tuple:
    return (
        Message.objects.filter(session_id=session_id).count(),
        Task.objects.filter(session_id=session_id).count(),
        Permission.objects.filter(session_id=session_id).count(),
        InboxItem.objects.filter(session_id=session_id).count(),
        LiveEvent.objects.count(),
    )


def _item(**extra: str) -> str:
    """An inbox item's JSON text; `extra` values are JSON text already."""
    fields = {"id": '"inbox_1_hostile"', "tag": '"t"', "request": '"r"', **extra}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


CHOICES = [
    ("POST", "messages", f'{{"messages": [{{"sender": "{LONE}"}}]}}', "messages[0].sender"),
    (
        "POST",
        "messages",
        f'{{"messages": [{{"sender": "user", "content": [{{"type": "{LONE}"}}]}}]}}',
        "messages[0].content[0].type",
    ),
    (
        "POST",
        "messages",
        f'{{"messages": [{{"sender": "agent", "tool_results": [{{"tool_name": "x", '
        f'"result": {{"status": "{LONE}"}}}}]}}]}}',
        "messages[0].tool_results[0].result.status",
    ),
    (
        "PUT",
        "tasks",
        f'{{"tasks": [{{"id": "t1", "content": "c", "status": "{LONE}"}}]}}',
        "tasks[0].status",
    ),
    ("POST", "tasks/t1", f'{{"updates": {{"status": "{LONE}"}}}}', "updates.status"),
    (
        "PUT",
        "permissions",
        f'{{"toolName": "checkout", "status": "{LONE}"}}',
        "status",
    ),
    (
        "POST",
        "inbox",
        f'{{"item": {_item(status=chr(34) + LONE + chr(34))}}}',
        "item.status",
    ),
    (
        "POST",
        "inbox/update",
        f'{{"itemId": "inbox_1_hostile", "updates": {{"status": "{LONE}"}}}}',
        "updates.status",
    ),
]


@pytest.mark.parametrize(("method", "route", "body", "field"), CHOICES)
def test_it_refuses_a_lone_surrogate_in_a_choice_field(
    owner_client, session_id, method, route, body, field
):
    before = _written(session_id)

    answer = _send(owner_client, method, f"/api/sessions/{session_id}/{route}", body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field
    assert "\\ud800" in answer.json()["error"]  # the input is named, escaped
    assert _written(session_id) == before


def test_it_refuses_a_lone_surrogate_in_a_chat_choice_field(owner_client):
    body = f'{{"messages": [{{"sender": "{LONE}", "text": "hi"}}]}}'

    answer = _send(owner_client, "POST", "/api/chat", body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == "messages[0].sender"


@pytest.mark.parametrize("field", ["content", "tool_calls", "tool_results"])
def test_it_refuses_a_null_inside_a_messages_list(owner_client, session_id, field):
    body = json.dumps({"messages": [{"sender": "agent", "text": "", field: [None]}]})
    before = _written(session_id)

    answer = _send(owner_client, "POST", f"/api/sessions/{session_id}/messages", body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == f"messages[0].{field}[0]"
    assert _written(session_id) == before


def test_it_refuses_a_null_inside_a_chat_messages_list(owner_client):
    body = json.dumps({"messages": [{"sender": "user", "text": "hi", "content": [None]}]})

    answer = _send(owner_client, "POST", "/api/chat", body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == "messages[0].content[0]"


DEEP_FIELDS = [
    (
        "POST",
        "messages",
        lambda d: (
            f'{{"messages": [{{"sender": "agent", "tool_calls": '
            f'[{{"tool_name": "x", "input_args": {d}}}]}}]}}'
        ),
        "messages[0].tool_calls[0].input_args",
    ),
    (
        "POST",
        "messages",
        lambda d: (
            f'{{"messages": [{{"sender": "agent", "tool_results": [{{"tool_name": "x", '
            f'"result": {{"status": "success", "data": {d}}}}}]}}]}}'
        ),
        "messages[0].tool_results[0].result.data",
    ),
    (
        "POST",
        "messages",
        lambda d: (
            f'{{"messages": [{{"sender": "agent", "tool_results": [{{"tool_name": "x", '
            f'"result": {{"status": "success", "renderData": {d}}}}}]}}]}}'
        ),
        "messages[0].tool_results[0].result.renderData",
    ),
    (
        "PUT",
        "permissions",
        lambda d: f'{{"toolName": "checkout", "status": "granted", "input": {d}}}',
        "input",
    ),
]


@pytest.mark.parametrize("levels", [1_000, 3_000, 10_000])
@pytest.mark.parametrize(("method", "route", "body_around", "field"), DEEP_FIELDS)
def test_it_refuses_a_json_field_nested_thousands_deep(
    owner_client, session_id, method, route, body_around, field, levels
):
    before = _written(session_id)

    answer = _send(
        owner_client, method, f"/api/sessions/{session_id}/{route}", body_around(deep(levels))
    )

    assert answer.status_code == 400, answer.content[:300]
    body = answer.json()
    assert body.get("field") == field or "nested too deeply" in body["error"]
    assert _written(session_id) == before


@pytest.mark.parametrize("levels", [1_000, 10_000])
def test_it_refuses_chat_tool_parameters_nested_thousands_deep(owner_client, levels):
    body = (
        '{"messages": [{"sender": "user", "text": "hi"}], '
        f'"tools": [{{"name": "t", "parameters": {deep(levels)}}}]}}'
    )

    answer = _send(owner_client, "POST", "/api/chat", body)

    assert answer.status_code == 400, answer.content[:300]
    body = answer.json()
    assert body.get("field") == "tools[0].parameters" or "nested too deeply" in body["error"]


def test_it_still_accepts_json_nested_a_reasonable_depth(owner_client, session_id):
    body = (
        '{"messages": [{"sender": "agent", "tool_calls": '
        f'[{{"tool_name": "x", "input_args": {{"a": {deep(30)}}}}}]}}]}}'
    )

    answer = _send(owner_client, "POST", f"/api/sessions/{session_id}/messages", body)

    assert answer.status_code == 200, answer.content[:300]


def test_it_refuses_an_unknown_message_field_nested_thousands_deep(owner_client, session_id):
    # Unknown keys are kept verbatim (bounded); found by the schema fuzz's "deep nesting".
    body = f'{{"messages": [{{"sender": "agent", "provider_options": {deep(3_000)}}}]}}'
    before = _written(session_id)

    answer = _send(owner_client, "POST", f"/api/sessions/{session_id}/messages", body)

    assert answer.status_code == 400, answer.content[:300]
    assert answer.json()["field"] == "messages[0].provider_options"
    assert _written(session_id) == before
