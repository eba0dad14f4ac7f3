"""OpenAICompatModel driven through the official SDK against a local fake of Chat Completions."""

from __future__ import annotations

import openai
import pytest

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.providers.errors import ModelProviderError
from gloveapp.core.providers.openai_compat import OpenAICompatModel
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData
from tests.core.providers.conftest import Recorder
from tests.fakes.openai_server import FakeOpenAI

STOCK = ToolSpec(
    "check_stock",
    "Look up current stock for a coffee by name.",
    {"type": "object", "properties": {"product": {"type": "string"}}, "required": ["product"]},
)
REMINDER = (
    "[Inbox: 1 blocking item(s) still pending — you cannot proceed with actions that depend on "
    "these results]\n- [payment_confirmation] Confirm payment for order #7 (posted "
    "2030-01-01T12:00:00.000Z)"
)


def make_model(server: FakeOpenAI, **kwargs: object) -> OpenAICompatModel:
    model = OpenAICompatModel(
        "gpt-test", api_key="sk-test", base_url=server.base_url, max_retries=0, **kwargs
    )
    model.set_system_prompt("You are Brew.")
    return model


async def test_streamed_text_reply(openai_server: FakeOpenAI, recorder: Recorder) -> None:
    openai_server.reply_stream(
        ["Kenyan ", "AA is ", "in stock."], prompt_tokens=30, completion_tokens=8, cached=10
    )
    model = make_model(openai_server)

    result = await model.prompt([Message("user", "Is Kenyan AA in stock?")], [STOCK], recorder)

    assert recorder.types == ["text_delta", "text_delta", "text_delta", "model_response_complete"]
    assert [p["text"] for p in recorder.of("text_delta")] == ["Kenyan ", "AA is ", "in stock."]
    assert recorder.of("model_response_complete") == [
        {
            "text": "Kenyan AA is in stock.",
            "stop_reason": "stop",
            "tokens_in": 30,
            "tokens_out": 8,
            "cache_read_input_tokens": 10,
        }
    ]
    reply = result.messages[0]
    assert (reply.sender, reply.text, reply.tool_calls) == ("agent", "Kenyan AA is in stock.", None)
    assert (result.tokens_in, result.tokens_out, result.cache_read_input_tokens) == (30, 8, 10)

    [request] = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are Brew."},
            {"role": "user", "content": "Is Kenyan AA in stock?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "check_stock",
                    "description": "Look up current stock for a coffee by name.",
                    "parameters": STOCK.input_schema,
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_non_streaming_reply(openai_server: FakeOpenAI, recorder: Recorder) -> None:
    openai_server.reply_json("Hello!", prompt_tokens=5, completion_tokens=2)
    model = make_model(openai_server, stream=False, max_tokens=256)

    result = await model.prompt([Message("user", "hi")], None, recorder)

    assert recorder.events == [
        (
            "model_response",
            {"text": "Hello!", "stop_reason": "stop", "tokens_in": 5, "tokens_out": 2},
        )
    ]
    assert result.messages[0].text == "Hello!"
    body = openai_server.bodies[0]
    assert body["max_tokens"] == 256
    assert "stream" not in body and "tools" not in body


async def test_streamed_tool_call_fragments_are_assembled(
    openai_server: FakeOpenAI, recorder: Recorder
) -> None:
    openai_server.reply_stream(
        ["Checking."],
        [
            ("call_a", "check_stock", {"product": "Kenyan AA"}),
            ("call_b", "check_stock", {"product": "Yirgacheffe", "grams": 250}),
        ],
        argument_pieces=5,
    )
    model = make_model(openai_server)

    result = await model.prompt([Message("user", "Stock?")], [STOCK], recorder)

    assert recorder.types == ["text_delta", "tool_use", "tool_use", "model_response_complete"]
    assert recorder.of("tool_use") == [
        {"id": "call_a", "name": "check_stock", "input": {"product": "Kenyan AA"}},
        {"id": "call_b", "name": "check_stock", "input": {"product": "Yirgacheffe", "grams": 250}},
    ]
    assert recorder.of("model_response_complete")[0]["stop_reason"] == "tool_calls"
    assert result.messages[0].tool_calls == [
        ToolCall("check_stock", {"product": "Kenyan AA"}, "call_a"),
        ToolCall("check_stock", {"product": "Yirgacheffe", "grams": 250}, "call_b"),
    ]


@pytest.mark.parametrize("stream", [True, False])
async def test_unparsable_arguments_stay_a_raw_string(
    openai_server: FakeOpenAI, recorder: Recorder, stream: bool
) -> None:
    calls = [("call_1", "check_stock", '{"product": "AA"'), ("call_2", "noop", "")]
    if stream:
        openai_server.reply_stream(None, calls)
    else:
        openai_server.reply_json(None, calls)
    model = make_model(openai_server, stream=stream)

    result = await model.prompt([Message("user", "go")], [STOCK], recorder)

    assert [call.input_args for call in result.messages[0].tool_calls] == ['{"product": "AA"', {}]
    assert result.messages[0].text == ""


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_results_are_sent_back_on_the_next_call(
    openai_server: FakeOpenAI, recorder: Recorder, stream: bool
) -> None:
    call = ("call_1", "check_stock", {"product": "AA"})
    if stream:
        openai_server.reply_stream(None, [call])
        openai_server.reply_stream(["Out of stock."])
    else:
        openai_server.reply_json(None, [call])
        openai_server.reply_json("Out of stock.")
    model = make_model(openai_server, stream=stream)
    history = [Message("user", "Is AA in stock?")]

    first = await model.prompt(history, [STOCK], recorder)
    history += first.messages
    history.append(
        Message(
            "user",
            "tool results",
            tool_results=[
                ToolResult(
                    "check_stock",
                    ToolResultData.error("Stock service down", {"retry_in": 5}),
                    call_id="call_1",
                )
            ],
        )
    )
    await model.prompt(history, [STOCK], recorder)

    assert openai_server.bodies[1]["messages"] == [
        {"role": "system", "content": "You are Brew."},
        {"role": "user", "content": "Is AA in stock?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "check_stock", "arguments": '{"product":"AA"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": 'Error: Stock service down\n{"retry_in":5}',
        },
    ]


async def test_trailing_blocking_reminder_after_tool_results_is_accepted(
    openai_server: FakeOpenAI, recorder: Recorder
) -> None:
    openai_server.reply_stream(["Waiting for the payment."])
    model = make_model(openai_server)
    history = [
        Message("user", "Can I check out?"),
        Message("agent", "", tool_calls=[ToolCall("check_stock", {"product": "Y"}, "call_9")]),
        Message(
            "user",
            "tool results",
            tool_results=[ToolResult("check_stock", ToolResultData.success("ok"), "call_9")],
        ),
        Message("user", REMINDER, framework_context="inbox"),
    ]

    result = await model.prompt(history, [STOCK], recorder)

    assert result.messages[0].text == "Waiting for the payment."
    sent = openai_server.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[-1] == {"role": "user", "content": REMINDER}


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_is_kept_and_can_be_echoed(
    openai_server: FakeOpenAI, recorder: Recorder, key: str
) -> None:
    openai_server.reply_stream(
        None,
        [("call_1", "check_stock", {"product": "AA"})],
        reasoning=["Need ", "stock."],
        reasoning_key=key,
    )
    openai_server.reply_json("Done.", reasoning_content="All good.")
    model = make_model(openai_server, echo_reasoning=True)

    first = await model.prompt([Message("user", "go")], [STOCK], recorder)
    assert first.messages[0].reasoning_content == "Need stock."
    # Reasoning is not shown as text.
    assert recorder.of("text_delta") == []

    history = [
        Message("user", "go"),
        *first.messages,
        Message(
            "user",
            "tool results",
            tool_results=[ToolResult("check_stock", ToolResultData.success(1), "call_1")],
        ),
    ]
    model.stream = False
    second = await model.prompt(history, [STOCK], recorder)
    assert second.messages[0].reasoning_content == "All good."
    assert openai_server.bodies[1]["messages"][2]["reasoning_content"] == "Need stock."


async def test_stream_without_usage_chunk(openai_server: FakeOpenAI, recorder: Recorder) -> None:
    openai_server.reply_stream(["hi"], include_usage=False)
    model = make_model(openai_server, include_usage=False)

    result = await model.prompt([Message("user", "hi")], None, recorder)

    assert (result.tokens_in, result.tokens_out) == (0, 0)
    assert "stream_options" not in openai_server.bodies[0]


@pytest.mark.parametrize(
    ("status", "error_type", "code", "retryable"),
    [
        (400, "invalid_request_error", None, False),
        (401, "invalid_request_error", "invalid_api_key", False),
        (429, "requests", "rate_limit_exceeded", True),
        (500, "server_error", None, True),
    ],
)
@pytest.mark.process
@pytest.mark.parametrize("stream", [True, False])
async def test_provider_errors_become_model_provider_error(
    openai_server: FakeOpenAI,
    recorder: Recorder,
    status: int,
    error_type: str,
    code: str | None,
    retryable: bool,
    stream: bool,
) -> None:
    openai_server.reply_error(status, error_type, "something specific went wrong", code)
    model = make_model(openai_server, stream=stream, provider="openrouter")

    with pytest.raises(ModelProviderError) as caught:
        await model.prompt([Message("user", "hi")], None, recorder)

    error = caught.value
    assert (error.provider, error.status, error.error_type) == ("openrouter", status, error_type)
    assert (
        str(error) == f"openrouter API error {status} ({error_type}): something specific went wrong"
    )
    assert error.retryable is retryable
    assert isinstance(error.__cause__, openai.APIStatusError)
    assert recorder.events == []


async def test_malformed_history_would_be_rejected(openai_server: FakeOpenAI) -> None:
    # Guards the reminder test: the fake rejects orphaned tool messages like the real API.
    client = openai.AsyncOpenAI(api_key="k", base_url=openai_server.base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="must be a response"):
        await client.chat.completions.create(
            model="gpt-test",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "x", "content": "orphan"},
            ],
        )


async def test_name_and_injected_client(openai_server: FakeOpenAI, recorder: Recorder) -> None:
    openai_server.reply_json("ok")
    client = openai.AsyncOpenAI(api_key="injected", base_url=openai_server.base_url, max_retries=0)
    model = OpenAICompatModel("llama3", client=client, stream=False, provider="ollama")

    assert model.name == "ollama:llama3"
    await model.prompt([Message("user", "hi")], None, recorder)
    assert openai_server.requests[0].headers["authorization"] == "Bearer injected"
    assert openai_server.bodies[0]["messages"] == [{"role": "user", "content": "hi"}]


async def test_error_chunk_inside_a_stream(openai_server: FakeOpenAI, recorder: Recorder) -> None:
    import json

    from tests.fakes.http_fake import Reply
    from tests.fakes.openai_server import completion_events, error_json

    events = completion_events(["partial"])[:2]
    events.append((None, json.dumps(error_json("server_error", "upstream overloaded"))))
    openai_server.enqueue(Reply(sse=events))
    model = make_model(openai_server, provider="openrouter")

    with pytest.raises(ModelProviderError) as caught:
        await model.prompt([Message("user", "hi")], None, recorder)

    assert caught.value.message == "upstream overloaded"
    assert caught.value.error_type == "server_error"
    assert "model_response_complete" not in recorder.types
