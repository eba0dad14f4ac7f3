"""`POST /api/chat`: glove-next's chat handler, served by Django as a text/event-stream."""

from __future__ import annotations

import json

import httpx
import pytest

from gloveapp.core import Message, ScriptedModel, ToolCall
from gloveapp.core.providers.registry import register_model_provider, unregister_model_provider

pytestmark = [pytest.mark.postgres]


def sse_frames(body: str) -> list[dict]:
    frames = [chunk for chunk in body.split("\n\n") if chunk.strip()]
    assert all(chunk.startswith("data: ") for chunk in frames), body
    return [json.loads(chunk[len("data: ") :]) for chunk in frames]


CHAT_BODY = {
    "systemPrompt": "You are a barista.",
    "messages": [{"sender": "user", "text": "A flat white, please"}],
    "tools": [
        {
            "name": "check_stock",
            "description": "Look up stock",
            "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}},
        }
    ],
}


def test_it_streams_glove_frames_ending_with_done(live_server_process, live_token):
    with httpx.stream(
        "POST",
        f"{live_server_process.url}/api/chat",
        json=CHAT_BODY,
        headers={"Authorization": f"Token {live_token}", "Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        frames = sse_frames(response.read().decode())

    assert frames[-1]["type"] == "done"
    assert all(f["type"] in {"text_delta", "tool_use"} for f in frames[:-1])
    assert [f for f in frames if f["type"] == "done"] == [frames[-1]]
    done = frames[-1]
    assert done["message"]["sender"] == "agent"
    assert isinstance(done["tokens_in"], int) and isinstance(done["tokens_out"], int)
    # The deltas add up to the final text, as a streaming client assembles it.
    deltas = "".join(f["text"] for f in frames if f["type"] == "text_delta")
    assert deltas == done["message"]["text"]


def test_it_refuses_an_anonymous_chat_over_http(live_server_process):
    response = httpx.post(f"{live_server_process.url}/api/chat", json=CHAT_BODY, timeout=30)
    assert response.status_code == 401


@pytest.mark.django_db
def test_it_refuses_a_malformed_chat_request_naming_the_field(owner_client):
    response = owner_client.post(
        "/api/chat", {"messages": [{"sender": "system", "text": "x"}]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "messages[0].sender"

    response = owner_client.post(
        "/api/chat",
        {"messages": [], "tools": [{"name": "bad name!", "description": ""}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tools[0].name"


@pytest.mark.django_db
def test_it_requires_the_messages(owner_client):
    response = owner_client.post("/api/chat", {"systemPrompt": "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "messages"


# -- the frames, with a scripted model plugged in through the model registry ---------------


@pytest.fixture
def scripted_chat_model(settings):
    """Make `GLOVE_MODEL = "chattest"` build a ScriptedModel the test scripts."""
    built: list[ScriptedModel] = []
    script: list = []

    def factory(model_name: str, **kwargs) -> ScriptedModel:
        model = ScriptedModel(list(script))
        built.append(model)
        return model

    register_model_provider("chattest", factory, replace=True)
    settings.GLOVE_MODEL = "chattest"
    yield script, built
    unregister_model_provider("chattest")


def chat(client, body: dict) -> list[dict]:
    response = client.post("/api/chat", body, format="json")
    assert response.status_code == 200
    # The test client drains the async stream synchronously (Daphne streams it).
    return sse_frames(b"".join(response).decode())


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_relays_text_and_tool_calls_as_glove_frames(owner_client, scripted_chat_model):
    script, built = scripted_chat_model
    script.append(
        Message(
            sender="agent",
            text="Let me check.",
            tool_calls=[ToolCall("check_stock", {"sku": "AA"}, id="toolu_1")],
        )
    )

    frames = chat(owner_client, CHAT_BODY)

    assert frames == [
        {"type": "text_delta", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "check_stock", "input": {"sku": "AA"}},
        {
            "type": "done",
            "message": {
                "sender": "agent",
                "text": "Let me check.",
                "tool_calls": [
                    {"id": "toolu_1", "tool_name": "check_stock", "input_args": {"sku": "AA"}}
                ],
            },
            "tokens_in": 100,
            "tokens_out": 20,
        },
    ]
    [call] = built[0].calls
    assert call.system_prompt == "You are a barista."
    assert call.tool_names == ["check_stock"]
    assert call.tools[0].input_schema == CHAT_BODY["tools"][0]["parameters"]
    assert [m.text for m in call.messages] == ["A flat white, please"]


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_passes_message_fields_it_does_not_interpret_both_ways(
    owner_client, scripted_chat_model
):
    script, built = scripted_chat_model
    state = {"openrouter": {"reasoning_details": [{"type": "reasoning.encrypted", "data": "x"}]}}
    script.append(Message(sender="agent", text="Hi.", extra={"provider_options": state}))
    earlier = {
        "sender": "agent",
        "text": "Before.",
        "provider_options": {"anthropic": {"signature": "s"}},
        "tool_calls": [
            {"id": "c1", "tool_name": "t", "input_args": {}, "provider_options": {"g": {}}}
        ],
    }
    body = {**CHAT_BODY, "messages": [CHAT_BODY["messages"][0], earlier]}

    done = chat(owner_client, body)[-1]

    assert done["message"]["provider_options"] == state
    # What the client sent reached the model adapter unchanged.
    assert built[0].calls[0].messages[1].to_dict() == earlier


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_reports_a_failed_model_call_in_the_done_frame(owner_client, scripted_chat_model):
    # An empty script: the model fails once streaming has started, as a provider error would.
    frames = chat(owner_client, CHAT_BODY)

    [done] = frames
    assert done["type"] == "done"
    assert done["message"]["text"].startswith("Error: ")
    assert (done["tokens_in"], done["tokens_out"]) == (0, 0)


@pytest.mark.django_db
def test_it_answers_503_naming_the_problem_when_the_model_is_misconfigured(
    owner_client, settings, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.GLOVE_MODEL = "anthropic:claude-sonnet-4-5"

    response = owner_client.post("/api/chat", CHAT_BODY, format="json")

    assert response.status_code == 503
    assert "ANTHROPIC_API_KEY" in response.json()["error"]


async def test_its_done_frame_carries_both_cache_counts():
    from gloveapp.api.store.chat import stream_model_turn
    from gloveapp.core.providers.scripted import ScriptedTurn

    model = ScriptedModel(
        [ScriptedTurn("Hi", cache_creation_input_tokens=1200, cache_read_input_tokens=300)]
    )
    body = b"".join(
        [chunk async for chunk in stream_model_turn(model, [Message("user", "Hello")], [])]
    )

    done = sse_frames(body.decode())[-1]
    assert (done["cache_creation_input_tokens"], done["cache_read_input_tokens"]) == (1200, 300)
