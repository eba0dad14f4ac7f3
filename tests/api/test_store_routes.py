"""Messages, counters, tasks and permissions over HTTP, in Glove's JSON field names."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def url(session_id: str, tail: str) -> str:
    return f"/api/sessions/{session_id}/{tail}"


TOOL_CALL_MESSAGE = {
    "sender": "agent",
    "text": "",
    "tool_calls": [{"id": "call_1", "tool_name": "check_stock", "input_args": {"sku": "AA"}}],
}
TOOL_RESULT_MESSAGE = {
    "sender": "user",
    "text": "tool results",
    "tool_results": [
        {
            "tool_name": "check_stock",
            "call_id": "call_1",
            "result": {"status": "success", "data": {"bags": 0}, "renderData": {"x": 1}},
        }
    ],
}


def test_it_appends_and_returns_messages_in_glove_format(owner_client, session_id):
    sent = [{"sender": "user", "text": "  hi  "}, TOOL_CALL_MESSAGE, TOOL_RESULT_MESSAGE]
    response = owner_client.post(url(session_id, "messages"), {"messages": sent}, format="json")
    assert response.status_code == 200
    assert response.json() == {"ok": True}

    got = owner_client.get(url(session_id, "messages")).json()
    assert [m["sender"] for m in got] == ["user", "agent", "user"]
    assert got[0]["text"] == "  hi  "  # kept exactly, never trimmed
    assert got[1]["tool_calls"] == TOOL_CALL_MESSAGE["tool_calls"]
    assert got[2]["tool_results"][0]["result"]["data"] == {"bags": 0}


def test_it_returns_only_what_the_model_sees_since_the_last_compaction(owner_client, session_id):
    history = [
        {"sender": "user", "text": "old"},
        {"sender": "user", "text": "summary one", "is_compaction": True},
        {"sender": "agent", "text": "middle"},
        {"sender": "user", "text": "summary two", "is_compaction": True},
        {"sender": "agent", "text": "new"},
    ]
    owner_client.post(url(session_id, "messages"), {"messages": history}, format="json")

    everything = owner_client.get(url(session_id, "messages")).json()
    context = owner_client.get(url(session_id, "messages") + "?since_compaction=1").json()
    assert [m["text"] for m in everything] == [m["text"] for m in history]
    assert [m["text"] for m in context] == ["summary two", "new"]
    assert context[0]["is_compaction"] is True


def test_it_refuses_a_malformed_message_naming_the_field(owner_client, session_id):
    response = owner_client.post(
        url(session_id, "messages"),
        {"messages": [{"sender": "user", "text": "ok"}, {"sender": "robot", "text": "x"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "messages[1].sender"
    # All or nothing: the valid first message was not written either.
    assert owner_client.get(url(session_id, "messages")).json() == []


def test_it_refuses_a_body_without_messages(owner_client, session_id):
    response = owner_client.post(url(session_id, "messages"), {}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "messages"


def test_it_refuses_nul_characters_that_postgres_cannot_store(owner_client, session_id):
    body = {
        "messages": [
            {"sender": "agent", "tool_calls": [{"tool_name": "t", "input_args": {"a": "x\u0000"}}]}
        ]
    }
    response = owner_client.post(url(session_id, "messages"), body, format="json")
    assert response.status_code == 400
    assert "tool_calls" in response.json()["field"]


def test_it_adds_tokens_and_counts_turns(owner_client, session_id):
    owner_client.post(
        url(session_id, "tokens"), {"tokens_in": 100, "tokens_out": 20}, format="json"
    )
    owner_client.post(url(session_id, "tokens"), {"tokens_in": 5, "tokens_out": 1}, format="json")
    owner_client.post(url(session_id, "turns"))
    owner_client.post(url(session_id, "turns"))

    tokens = owner_client.get(url(session_id, "tokens")).json()
    assert tokens == {
        "token_count": 126,
        "tokens_in_total": 105,
        "tokens_out_total": 21,
        "consumption": {
            "tokens_in": 105,
            "tokens_out": 21,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    assert owner_client.get(url(session_id, "turns")).json() == {"turn_count": 2}


def test_it_returns_the_cache_token_totals_it_was_given(owner_client, session_id):
    for cache_write, cache_read in ((300, 0), (0, 280), (12, 270)):
        owner_client.post(
            url(session_id, "tokens"),
            {
                "tokens_in": 10,
                "tokens_out": 2,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
            },
            format="json",
        )
    consumption = owner_client.get(url(session_id, "tokens")).json()["consumption"]
    assert consumption == {
        "tokens_in": 30,
        "tokens_out": 6,
        "cache_creation_input_tokens": 312,
        "cache_read_input_tokens": 550,
    }


def test_it_resets_counters_but_keeps_messages_and_totals(owner_client, session_id):
    owner_client.post(
        url(session_id, "messages"), {"messages": [{"sender": "user", "text": "a"}]}, format="json"
    )
    owner_client.post(url(session_id, "tokens"), {"tokens_in": 10, "tokens_out": 2}, format="json")
    owner_client.post(url(session_id, "turns"))

    assert owner_client.post(url(session_id, "reset-counters")).json() == {"ok": True}
    assert owner_client.get(url(session_id, "tokens")).json()["token_count"] == 0
    assert owner_client.get(url(session_id, "turns")).json() == {"turn_count": 0}
    assert len(owner_client.get(url(session_id, "messages")).json()) == 1


def test_it_refuses_negative_tokens_naming_the_field(owner_client, session_id):
    response = owner_client.post(
        url(session_id, "tokens"), {"tokens_in": -1, "tokens_out": 0}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tokens_in"


TASKS = [
    {"id": "t1", "content": "Grind beans", "activeForm": "Grinding beans", "status": "pending"},
    {"id": "t2", "content": "Brew", "activeForm": "Brewing", "status": "pending"},
]


def test_it_replaces_the_task_list(owner_client, session_id):
    owner_client.put(url(session_id, "tasks"), {"tasks": TASKS}, format="json")
    assert owner_client.get(url(session_id, "tasks")).json() == TASKS

    owner_client.put(url(session_id, "tasks"), {"tasks": TASKS[1:]}, format="json")
    assert owner_client.get(url(session_id, "tasks")).json() == TASKS[1:]


def test_it_updates_one_task(owner_client, session_id):
    owner_client.put(url(session_id, "tasks"), {"tasks": TASKS}, format="json")
    response = owner_client.post(
        url(session_id, "tasks/t1"),
        {"updates": {"status": "in_progress", "activeForm": "Grinding now"}},
        format="json",
    )
    assert response.status_code == 200
    first = owner_client.get(url(session_id, "tasks")).json()[0]
    assert first["status"] == "in_progress"
    assert first["activeForm"] == "Grinding now"


def test_it_ignores_an_update_of_an_unknown_task_like_glove(owner_client, session_id):
    owner_client.put(url(session_id, "tasks"), {"tasks": TASKS}, format="json")
    response = owner_client.post(
        url(session_id, "tasks/nope"), {"updates": {"status": "completed"}}, format="json"
    )
    assert response.status_code == 200
    assert owner_client.get(url(session_id, "tasks")).json() == TASKS


def test_it_refuses_a_bad_task_status_naming_the_field(owner_client, session_id):
    response = owner_client.put(
        url(session_id, "tasks"),
        {"tasks": [{"id": "t1", "content": "x", "status": "done"}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tasks[0].status"

    response = owner_client.post(
        url(session_id, "tasks/t1"), {"updates": {"colour": "red"}}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "updates.colour"


def test_it_refuses_duplicate_task_ids(owner_client, session_id):
    response = owner_client.put(
        url(session_id, "tasks"), {"tasks": TASKS + TASKS[:1]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tasks"


def test_it_remembers_permissions_per_tool_and_input(owner_client, session_id):
    perms = url(session_id, "permissions")
    body = {"toolName": "place_order", "status": "granted", "input": {"sku": "AA", "qty": 1}}
    assert owner_client.put(perms, body, format="json").json() == {"ok": True}

    same = {"toolName": "place_order", "input": json.dumps({"sku": "AA", "qty": 1})}
    other = {"toolName": "place_order", "input": json.dumps({"sku": "AA", "qty": 2})}
    assert owner_client.get(perms, same).json() == {"status": "granted"}
    assert owner_client.get(perms, other).json() == {"status": "unset"}
    assert owner_client.get(perms, {"toolName": "unknown"}).json() == {"status": "unset"}


def test_it_refuses_a_permission_query_with_bad_json(owner_client, session_id):
    response = owner_client.get(url(session_id, "permissions"), {"toolName": "x", "input": "{"})
    assert response.status_code == 400
    assert response.json()["field"] == "input"


def test_it_resets_one_remembered_permission_or_all(owner_client, session_id):
    perms = url(session_id, "permissions")
    for tool in ("place_order", "wipe"):
        owner_client.put(perms, {"toolName": tool, "status": "denied"}, format="json")

    one = owner_client.delete(f"{perms}?toolName=wipe")
    after_one = owner_client.get(perms, {"toolName": "wipe"}).json()
    kept = owner_client.get(perms, {"toolName": "place_order"}).json()
    everything = owner_client.delete(perms)

    assert one.json() == {"reset": 1} and after_one == {"status": "unset"}
    assert kept == {"status": "denied"}
    assert everything.json() == {"reset": 1}
    assert owner_client.get(perms, {"toolName": "place_order"}).json() == {"status": "unset"}
