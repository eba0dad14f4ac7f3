"""Every store keeps the message fields it does not interpret, verbatim (issue 14).

The message below carries every field glove-core 4.1.0's `Message` type declares (its
`dist/core.d.ts`: `provider_options` on the message and on each tool call,
`pre_modified_text`, `content[].name`, `result.generateSummaryArgs`, ...) plus fields no
Glove version has yet; each store must give back exactly the JSON it was given.
"""

from __future__ import annotations

import copy

from gloveapp.core.types import Message, TokenUsage

GLOVE_4_1_0_AGENT_MESSAGE = {
    "sender": "agent",
    "id": "msg_agent_1",
    "text": "Let me check the stock.",
    "reasoning_content": "The user wants beans; look them up.",
    "provider_options": {
        "openrouter": {"reasoning_details": [{"type": "reasoning.encrypted", "data": "abc=="}]},
        "anthropic": {"signature": "sig-1"},
    },
    "tool_calls": [
        {
            "id": "call_1",
            "tool_name": "check_stock",
            "input_args": {"product": "Yirgacheffe", "qty": 2},
            "provider_options": {"google": {"thoughtSignature": "c2lnbmF0dXJl"}},
        },
        {"id": "call_2", "tool_name": "get_catalogue", "input_args": None},
    ],
    # Not in 4.1.0: a field a later Glove might add, at message and tool-call level.
    "future_flag": None,
    "future_object": {"nested": [1, 2.5, "three", {"deep": True}], "empty": {}},
}

GLOVE_4_1_0_USER_MESSAGE = {
    "sender": "user",
    "id": "msg_user_1",
    "text": "Is this in stock?",
    "pre_modified_text": "is this in stock??",
    "framework_context": "runtime",
    "is_skill_injection": True,
    "content": [
        {"type": "text", "text": "Is this in stock?", "name": "question.txt"},
        {
            "type": "image",
            "name": "bag.png",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": "iVBORw0KGgo=",
                "future_source_field": "kept",
            },
        },
        {
            "type": "document",
            "source": {"type": "url", "media_type": "application/pdf", "url": "https://x/y.pdf"},
            "future_part_field": [None, False],
        },
    ],
    "tool_results": [
        {
            "tool_name": "check_stock",
            "call_id": "call_1",
            "duration_ms": 12,
            "result": {
                "status": "success",
                "data": {"in_stock": False},
                "message": "out of stock",
                "renderData": {"card": "stock"},
                "summary": "Out of stock.",
                "generateSummaryArgs": {"lines": [1, 20], "source": "inventory"},
                "future_result_field": "kept",
            },
            "future_tool_result_field": 7,
        }
    ],
    "future_number": 1.5,
}


async def test_it_returns_every_message_field_it_was_given_unchanged(store):
    sent = [GLOVE_4_1_0_USER_MESSAGE, GLOVE_4_1_0_AGENT_MESSAGE]
    await store.append_messages([Message.from_dict(copy.deepcopy(m)) for m in sent])
    assert [m.to_dict() for m in await store.get_messages()] == sent


async def test_it_keeps_unknown_fields_of_a_compaction_summary_in_context(store):
    summary = {"sender": "user", "text": "[summary]", "is_compaction": True, "future": {"a": 1}}
    await store.append_messages(
        [Message(sender="user", text="old"), Message.from_dict(copy.deepcopy(summary))]
    )
    assert [m.to_dict() for m in await store.get_messages()][-1] == summary


async def test_it_returns_the_cache_token_totals_it_was_given(store):
    await store.add_tokens(
        TokenUsage(
            tokens_in=100, tokens_out=10, cache_creation_input_tokens=40, cache_read_input_tokens=0
        )
    )
    await store.add_tokens(TokenUsage(tokens_in=50, tokens_out=5, cache_read_input_tokens=30))
    consumption = await store.get_token_consumption()
    assert (consumption.tokens_in, consumption.tokens_out) == (150, 15)
    assert consumption.cache_creation_input_tokens == 40
    assert consumption.cache_read_input_tokens == 30
