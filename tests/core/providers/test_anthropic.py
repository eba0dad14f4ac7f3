"""AnthropicModel driven through the official SDK against a local fake of the Messages API."""

from __future__ import annotations

import anthropic
import pytest

from gloveapp.core.providers.anthropic import AnthropicModel
from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.providers.errors import ModelProviderError
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData
from tests.core.providers.conftest import Recorder
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use

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


def make_model(server: FakeAnthropic, **kwargs: object) -> AnthropicModel:
    model = AnthropicModel(
        "claude-test", api_key="sk-ant-test", base_url=server.url, max_retries=0, **kwargs
    )
    model.set_system_prompt("You are Brew.")
    return model


async def test_streamed_text_reply(anthropic_server: FakeAnthropic, recorder: Recorder) -> None:
    anthropic_server.reply_stream(
        [text(["Kenyan ", "AA is ", "in stock."])], input_tokens=40, output_tokens=9
    )
    model = make_model(anthropic_server)

    result = await model.prompt([Message("user", "Is Kenyan AA in stock?")], [STOCK], recorder)

    assert recorder.types == ["text_delta", "text_delta", "text_delta", "model_response_complete"]
    assert [p["text"] for p in recorder.of("text_delta")] == ["Kenyan ", "AA is ", "in stock."]
    assert recorder.of("model_response_complete") == [
        {
            "text": "Kenyan AA is in stock.",
            "stop_reason": "end_turn",
            "tokens_in": 40,
            "tokens_out": 9,
        }
    ]
    assert len(result.messages) == 1
    reply = result.messages[0]
    assert (reply.sender, reply.text, reply.tool_calls) == ("agent", "Kenyan AA is in stock.", None)
    assert (result.tokens_in, result.tokens_out, result.stop_reason) == (40, 9, "end_turn")

    [request] = anthropic_server.requests
    assert request.path == "/v1/messages"
    assert "sk-ant-test" in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": "Is Kenyan AA in stock?"}],
        "system": "You are Brew.",
        "tools": [
            {
                "name": "check_stock",
                "description": "Look up current stock for a coffee by name.",
                "input_schema": STOCK.input_schema,
            }
        ],
        "stream": True,
    }


async def test_non_streaming_reply_emits_model_response(
    anthropic_server: FakeAnthropic, recorder: Recorder
) -> None:
    anthropic_server.reply_json(
        [text("Hello!")], input_tokens=5, output_tokens=2, cache_read=3, cache_creation=4
    )
    model = make_model(anthropic_server, stream=False)

    result = await model.prompt([Message("user", "hi")], None, recorder)

    assert recorder.events == [
        (
            "model_response",
            {
                "text": "Hello!",
                "stop_reason": "end_turn",
                "tokens_in": 5,
                "tokens_out": 2,
                "cache_creation_input_tokens": 4,
                "cache_read_input_tokens": 3,
            },
        )
    ]
    assert result.usage.to_dict() == {
        "tokens_in": 5,
        "tokens_out": 2,
        "cache_creation_input_tokens": 4,
        "cache_read_input_tokens": 3,
    }
    body = anthropic_server.bodies[0]
    assert "stream" not in body and "tools" not in body


async def test_streamed_tool_calls(anthropic_server: FakeAnthropic, recorder: Recorder) -> None:
    anthropic_server.reply_stream(
        [
            text("Let me check both."),
            tool_use("toolu_01", "check_stock", {"product": "Kenyan AA"}, pieces=4),
            tool_use("toolu_02", "check_stock", {"product": "Yirgacheffe", "grams": 250}),
        ],
        cache_read=100,
    )
    model = make_model(anthropic_server)

    result = await model.prompt([Message("user", "Stock?")], [STOCK], recorder)

    assert recorder.types == ["text_delta", "tool_use", "tool_use", "model_response_complete"]
    assert recorder.of("tool_use") == [
        {"id": "toolu_01", "name": "check_stock", "input": {"product": "Kenyan AA"}},
        {
            "id": "toolu_02",
            "name": "check_stock",
            "input": {"product": "Yirgacheffe", "grams": 250},
        },
    ]
    complete = recorder.of("model_response_complete")[0]
    assert complete["stop_reason"] == "tool_use"
    assert complete["cache_read_input_tokens"] == 100
    assert complete["tool_calls"] == [
        {"id": "toolu_01", "tool_name": "check_stock", "input_args": {"product": "Kenyan AA"}},
        {
            "id": "toolu_02",
            "tool_name": "check_stock",
            "input_args": {"product": "Yirgacheffe", "grams": 250},
        },
    ]
    reply = result.messages[0]
    assert reply.text == "Let me check both."
    assert reply.tool_calls == [
        ToolCall("check_stock", {"product": "Kenyan AA"}, "toolu_01"),
        ToolCall("check_stock", {"product": "Yirgacheffe", "grams": 250}, "toolu_02"),
    ]


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_results_are_sent_back_on_the_next_call(
    anthropic_server: FakeAnthropic, recorder: Recorder, stream: bool
) -> None:
    blocks = [tool_use("toolu_01", "check_stock", {"product": "AA"})]
    if stream:
        anthropic_server.reply_stream(blocks)
        anthropic_server.reply_stream([text("Out of stock.")])
    else:
        anthropic_server.reply_json(blocks)
        anthropic_server.reply_json([text("Out of stock.")])
    model = make_model(anthropic_server, stream=stream)
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
                    ToolResultData.success({"in_stock": False}, render_data={"ui": "only"}),
                    call_id=first.messages[0].tool_calls[0].id,
                    duration_ms=3,
                )
            ],
        )
    )
    second = await model.prompt(history, [STOCK], recorder)

    assert second.messages[0].text == "Out of stock."
    assert anthropic_server.bodies[1]["messages"] == [
        {"role": "user", "content": "Is AA in stock?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "check_stock",
                    "input": {"product": "AA"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": '{"in_stock":false}',
                    "is_error": False,
                }
            ],
        },
    ]


async def test_trailing_blocking_reminder_after_tool_results_is_accepted(
    anthropic_server: FakeAnthropic, recorder: Recorder
) -> None:
    # The fake rejects what the real API rejects (e.g. text before tool_result): a 400 here
    # would mean the reminder made the request malformed.
    anthropic_server.reply_stream([text("Waiting for the payment.")])
    model = make_model(anthropic_server)
    history = [
        Message("user", "Can I check out?"),
        Message("agent", "", tool_calls=[ToolCall("check_stock", {"product": "Y"}, "toolu_9")]),
        Message(
            "user",
            "tool results",
            tool_results=[ToolResult("check_stock", ToolResultData.success({"ok": 1}), "toolu_9")],
        ),
        Message("user", REMINDER, framework_context="inbox"),
    ]

    result = await model.prompt(history, [STOCK], recorder)

    assert result.messages[0].text == "Waiting for the payment."
    last_turn = anthropic_server.bodies[0]["messages"][-1]
    assert last_turn == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_9",
                "content": '{"ok":1}',
                "is_error": False,
            },
            {"type": "text", "text": REMINDER},
        ],
    }


async def test_the_fake_rejects_text_before_tool_results(anthropic_server: FakeAnthropic) -> None:
    # Guards the test above: glove-core's spliced placement, sent raw, is a 400.
    client = anthropic.AsyncAnthropic(api_key="k", base_url=anthropic_server.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="tool_result blocks must come first"):
        await client.messages.create(
            model="claude-test",
            max_tokens=10,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "reminder"},
                        {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
                    ],
                },
            ],
        )


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (529, "overloaded_error", True),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
async def test_provider_errors_become_model_provider_error(
    anthropic_server: FakeAnthropic,
    recorder: Recorder,
    status: int,
    error_type: str,
    retryable: bool,
    stream: bool,
) -> None:
    anthropic_server.reply_error(status, error_type, "something specific went wrong")
    model = make_model(anthropic_server, stream=stream)

    with pytest.raises(ModelProviderError) as caught:
        await model.prompt([Message("user", "hi")], None, recorder)

    error = caught.value
    assert (error.provider, error.status, error.error_type) == ("anthropic", status, error_type)
    assert error.message == "something specific went wrong"
    assert (
        str(error) == f"anthropic API error {status} ({error_type}): something specific went wrong"
    )
    assert error.retryable is retryable
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert recorder.events == []


async def test_error_event_inside_a_stream(
    anthropic_server: FakeAnthropic, recorder: Recorder
) -> None:
    anthropic_server.reply_stream_error([text("partial")], "overloaded_error", "Overloaded")
    model = make_model(anthropic_server)

    with pytest.raises(ModelProviderError) as caught:
        await model.prompt([Message("user", "hi")], None, recorder)

    assert (caught.value.status, caught.value.error_type) == (529, "overloaded_error")
    assert caught.value.message == "Overloaded"
    assert "model_response_complete" not in recorder.types


async def test_injected_client_and_name(
    anthropic_server: FakeAnthropic, recorder: Recorder
) -> None:
    anthropic_server.reply_json([text("ok")])
    client = anthropic.AsyncAnthropic(
        api_key="injected", base_url=anthropic_server.url, max_retries=0
    )
    model = AnthropicModel("claude-x", client=client, stream=False, max_tokens=64)

    assert model.name == "anthropic:claude-x"
    await model.prompt([Message("user", "hi")], None, recorder)
    headers = anthropic_server.requests[0].headers
    assert "injected" in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert anthropic_server.bodies[0]["max_tokens"] == 64
    assert "system" not in anthropic_server.bodies[0]


async def test_truncated_stream_is_an_error(anthropic_server: FakeAnthropic) -> None:
    from tests.fakes.anthropic_server import message_events
    from tests.fakes.http_fake import Reply

    # The connection closes after the first text delta: no message_delta, no message_stop.
    anthropic_server.enqueue(Reply(sse=message_events([text(["partial ", "rest"])])[:4]))
    model = make_model(anthropic_server)
    recorder = Recorder()

    with pytest.raises(ModelProviderError, match="ended before message_stop"):
        await model.prompt([Message("user", "hi")], None, recorder)
    assert recorder.types == ["text_delta"]
