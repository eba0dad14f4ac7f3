"""The message formatters (contract §1.6), including parity with glove-core 4.1.0's Anthropic
wire messages recorded in the reference transcript."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.providers.formatting import (
    anthropic_tools,
    format_anthropic_messages,
    format_openai_messages,
    format_tool_result_content,
    js_json,
    openai_tools,
)
from gloveapp.core.types import (
    ContentPart,
    ContentSource,
    Message,
    ToolCall,
    ToolResult,
    ToolResultData,
)
from tests.fakes.anthropic_server import wire_problem as anthropic_wire_problem
from tests.fakes.openai_server import wire_problem as openai_wire_problem

FIXTURES = Path(__file__).parent / "fixtures"
PARITY = json.loads((FIXTURES / "anthropic_wire_parity.json").read_text())["cases"]

REMINDER = (
    "[Inbox: 1 blocking item(s) still pending — you cannot proceed with actions that depend on "
    "these results]\n- [payment_confirmation] Confirm payment for order #7 (posted "
    "2030-01-01T12:00:00.000Z)"
)


def user(text: str, **kwargs: Any) -> Message:
    return Message(sender="user", text=text, **kwargs)


def agent(text: str = "", calls: list[ToolCall] | None = None) -> Message:
    return Message(sender="agent", text=text, tool_calls=calls)


def results(*items: ToolResult) -> Message:
    return Message(sender="user", text="tool results", tool_results=list(items))


def ok(call_id: str | None, data: Any, **kwargs: Any) -> ToolResult:
    return ToolResult(
        tool_name="check_stock",
        call_id=call_id,
        result=ToolResultData(status="success", data=data, **kwargs),
    )


def anthropic_valid(wire: list[dict[str, Any]]) -> None:
    problem = anthropic_wire_problem({"model": "m", "max_tokens": 1, "messages": wire})
    assert problem is None, problem


def openai_valid(wire: list[dict[str, Any]]) -> None:
    problem = openai_wire_problem({"model": "m", "messages": wire})
    assert problem is None, problem


# --- parity with glove-core 4.1.0 ------------------------------------------------------------


@pytest.mark.parametrize(
    "case", PARITY, ids=[f"{c['scenario']}-{c['step']}-{c['call_index']}" for c in PARITY]
)
def test_anthropic_wire_messages_match_glove_core(case: dict[str, Any]) -> None:
    messages = [Message.from_dict(data) for data in case["messages"]]
    assert format_anthropic_messages(messages) == case["anthropic_wire_messages"]


def test_parity_fixtures_cover_the_interesting_shapes() -> None:
    shapes = set()
    for case in PARITY:
        for turn in case["anthropic_wire_messages"]:
            if isinstance(turn["content"], list):
                shapes.add(tuple(block["type"] for block in turn["content"]))
    assert ("tool_result", "text") in shapes  # the trailing blocking reminder
    assert ("tool_result", "tool_result", "tool_result") in shapes
    assert ("text", "tool_use") in shapes
    assert ("text", "text", "text") in shapes


# --- tool result content ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ToolResultData.success("plain text"), "plain text"),
        (ToolResultData.success({"b": 1, "a": [1, 2.0, None]}), '{"b":1,"a":[1,2,null]}'),
        (ToolResultData.success({"name": "Café"}), '{"name":"Café"}'),
        (ToolResultData.success(None), "null"),
        (ToolResultData.success(0), "0"),
        (ToolResultData.success(True), "true"),
        (ToolResultData.success(1.5), "1.5"),
        (ToolResultData.success(math.nan), "null"),
        (
            ToolResultData(
                status="aborted", data=None, message="Tool execution was aborted by the user."
            ),
            "null",
        ),
        (ToolResultData.error("No tool called x exists."), "Error: No tool called x exists."),
        (
            ToolResultData.error("TOOL_INPUT_INVALID", "bad input"),
            "Error: TOOL_INPUT_INVALID\nbad input",
        ),
        (ToolResultData.error("failed", {"code": 7}), 'Error: failed\n{"code":7}'),
        # JS truthiness: an empty object is truthy, 0 and "" are not.
        (ToolResultData.error("failed", {}), "Error: failed\n{}"),
        (ToolResultData.error("failed", 0), "Error: failed"),
        (ToolResultData.error("failed", ""), "Error: failed"),
        (ToolResultData(status="error", data="detail"), "Error: Unknown error\ndetail"),
        (ToolResultData(status="error", data=None, message="  spaced  "), "Error:   spaced"),
    ],
)
def test_tool_result_content(result: ToolResultData, expected: str) -> None:
    assert format_tool_result_content(result) == expected


def test_render_data_and_summary_never_reach_the_model() -> None:
    secret = {"html": "<b>for the UI only</b>"}
    result = ok("toolu_1", {"in_stock": True}, render_data=secret)
    wire = format_anthropic_messages(
        [user("q"), agent(calls=[ToolCall("check_stock", {}, "toolu_1")]), results(result)]
    )
    assert "for the UI only" not in json.dumps(wire)
    openai_wire = format_openai_messages(
        [user("q"), agent(calls=[ToolCall("check_stock", {}, "toolu_1")]), results(result)]
    )
    assert "for the UI only" not in json.dumps(openai_wire)


def test_js_json_is_compact_and_keeps_key_order() -> None:
    assert js_json({"z": 1, "a": {"y": [1.0, "x"]}}) == '{"z":1,"a":{"y":[1,"x"]}}'
    assert js_json(float("inf")) == "null"


# --- Anthropic -------------------------------------------------------------------------------


def test_anthropic_error_results_are_flagged_and_others_are_not() -> None:
    calls = [ToolCall("a", {}, "t1"), ToolCall("b", {}, "t2"), ToolCall("c", {}, "t3")]
    wire = format_anthropic_messages(
        [
            user("go"),
            agent(calls=calls),
            results(
                ok("t1", "fine"),
                ToolResult("b", ToolResultData.error("boom"), "t2"),
                ToolResult("c", ToolResultData(status="aborted", data=None), "t3"),
            ),
        ]
    )
    blocks = wire[2]["content"]
    assert [b["is_error"] for b in blocks] == [False, True, False]
    assert [b["content"] for b in blocks] == ["fine", "Error: boom", "null"]
    anthropic_valid(wire)


def test_anthropic_missing_ids_become_unknown_and_minted_ids() -> None:
    wire = format_anthropic_messages(
        [user("go"), agent(calls=[ToolCall("check_stock", {"p": 1})]), results(ok(None, "x"))]
    )
    tool_use = wire[1]["content"][0]
    assert tool_use["id"].startswith("toolu_") and len(tool_use["id"]) > len("toolu_")
    # The result's id is `_unknown`, so it can never match the minted id (§10.16); the
    # tool_use is then patched with a synthetic result.
    ids = [b["tool_use_id"] for b in wire[2]["content"]]
    assert ids == ["_unknown", tool_use["id"]]
    assert wire[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": tool_use["id"],
        "content": "No result available",
    }


def test_anthropic_consecutive_same_role_messages_merge() -> None:
    wire = format_anthropic_messages([user("one"), user("two"), agent("a"), agent("b")])
    assert wire == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
    ]


def test_anthropic_duplicate_tool_results_are_dropped() -> None:
    wire = format_anthropic_messages(
        [
            user("go"),
            agent(calls=[ToolCall("check_stock", {}, "t1")]),
            results(ok("t1", "first")),
            results(ok("t1", "second")),
        ]
    )
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "first", "is_error": False}
    ]
    anthropic_valid(wire)


def test_anthropic_tool_calls_without_results_get_a_synthetic_result() -> None:
    # An aborted turn: the tool_use was persisted, the results were not.
    calls = [ToolCall("a", {}, "t1"), ToolCall("b", {}, "t2")]
    at_end = format_anthropic_messages([user("go"), agent(calls=calls)])
    assert at_end[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "No result available"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "No result available"},
        ],
    }
    anthropic_valid(at_end)

    # Then the user asks again: the patch goes before the new text, keeping the turn valid.
    next_ask = format_anthropic_messages([user("go"), agent(calls=calls), user("hello?")])
    assert [b["type"] for b in next_ask[-1]["content"]] == ["tool_result", "tool_result", "text"]
    anthropic_valid(next_ask)

    partly = format_anthropic_messages([user("go"), agent(calls=calls), results(ok("t1", "x"))])
    assert [b["tool_use_id"] for b in partly[-1]["content"]] == ["t1", "t2"]
    assert partly[-1]["content"][1]["content"] == "No result available"


def test_anthropic_trailing_reminder_after_tool_results_is_well_formed() -> None:
    reminder = user(REMINDER, framework_context="inbox")
    call = ToolCall("check_stock", {"product": "Yirgacheffe"}, "t1")
    wire = format_anthropic_messages(
        [user("buy"), agent(calls=[call]), results(ok("t1", "ok")), reminder]
    )
    assert [b["type"] for b in wire[-1]["content"]] == ["tool_result", "text"]
    assert wire[-1]["content"][1]["text"] == REMINDER
    anthropic_valid(wire)


def test_anthropic_reminder_spliced_before_results_is_still_well_formed() -> None:
    # glove-core's buggy placement (§3.4): reminder between the tool_use and its results.
    reminder = user(REMINDER, framework_context="inbox")
    call = ToolCall("check_stock", {}, "t1")
    wire = format_anthropic_messages(
        [user("buy"), agent(calls=[call]), reminder, results(ok("t1", "ok"))]
    )
    assert [b["type"] for b in wire[-1]["content"]] == ["tool_result", "text"]
    anthropic_valid(wire)


def test_anthropic_agent_text_and_tool_calls() -> None:
    wire = format_anthropic_messages(
        [
            user("go"),
            agent("Let me check.", [ToolCall("check_stock", None, "t1")]),
            results(ok("t1", 1)),
        ]
    )
    assert wire[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "t1", "name": "check_stock", "input": {}},
        ],
    }


def test_anthropic_tool_input_must_be_an_object() -> None:
    # An OpenAI-compatible model can leave unparsable arguments as a raw string.
    wire = format_anthropic_messages(
        [
            user("go"),
            agent(calls=[ToolCall("a", '{"x": 1}', "t1"), ToolCall("b", "not json", "t2")]),
            results(ok("t1", 1), ok("t2", 2)),
        ]
    )
    assert [b["input"] for b in wire[1]["content"]] == [{"x": 1}, {"input": "not json"}]


def test_anthropic_empty_turns_are_left_out() -> None:
    wire = format_anthropic_messages([user("hi"), agent(""), user("again")])
    assert wire == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_anthropic_multimodal_content() -> None:
    message = user(
        "look",
        content=[
            ContentPart(type="text", text="What is this?"),
            ContentPart(
                type="image",
                source=ContentSource(type="base64", media_type="image/png", data="AAAA"),
            ),
            ContentPart(
                type="image",
                source=ContentSource(type="url", media_type="image/jpeg", url="https://x/y.jpg"),
            ),
            ContentPart(
                type="document",
                source=ContentSource(type="base64", media_type="application/pdf", data="JVBE"),
            ),
            ContentPart(
                type="video",
                source=ContentSource(type="url", media_type="video/mp4", url="https://x/v.mp4"),
            ),
            ContentPart(type="text", text=""),
        ],
    )
    assert format_anthropic_messages([message]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
                },
                {"type": "text", "text": "[Video attachment: video/mp4]"},
            ],
        }
    ]


def test_tool_specs_become_provider_tools() -> None:
    schema = {
        "type": "object",
        "properties": {"product": {"type": "string"}},
        "required": ["product"],
    }
    specs = [ToolSpec("check_stock", "Look up stock.", schema), ToolSpec("noop", "Nothing.")]
    assert anthropic_tools(specs) == [
        {"name": "check_stock", "description": "Look up stock.", "input_schema": schema},
        {
            "name": "noop",
            "description": "Nothing.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]
    assert openai_tools(specs)[0] == {
        "type": "function",
        "function": {"name": "check_stock", "description": "Look up stock.", "parameters": schema},
    }


# --- OpenAI ----------------------------------------------------------------------------------


def test_openai_system_prompt_comes_first() -> None:
    assert format_openai_messages([user("hi")], "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert format_openai_messages([user("hi")], None) == [{"role": "user", "content": "hi"}]


def test_openai_tool_round_trip() -> None:
    calls = [ToolCall("check_stock", {"product": "AA"}, "call_1"), ToolCall("b", "raw", "call_2")]
    wire = format_openai_messages(
        [
            user("go"),
            agent("", calls),
            results(
                ok("call_1", {"n": 1}),
                ToolResult("b", ToolResultData.error("bad", "why"), "call_2"),
            ),
            agent("done"),
        ]
    )
    assert wire == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "check_stock", "arguments": '{"product":"AA"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": "raw"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"n":1}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad\nwhy"},
        {"role": "assistant", "content": "done"},
    ]
    openai_valid(wire)


def test_openai_user_texts_merge_with_newlines() -> None:
    assert format_openai_messages([user("a"), user("b"), user("c")]) == [
        {"role": "user", "content": "a\nb\nc"}
    ]


def test_openai_merging_keeps_media_parts() -> None:
    image = ContentPart(
        type="image",
        source=ContentSource(type="url", media_type="image/png", url="https://x/i.png"),
    )
    wire = format_openai_messages([user("look", content=[image]), user("also this")])
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
                {"type": "text", "text": "also this"},
            ],
        }
    ]


def test_openai_multimodal_parts() -> None:
    message = user(
        "x",
        content=[
            ContentPart(type="text", text="see"),
            ContentPart(
                type="image",
                source=ContentSource(type="base64", media_type="image/png", data="AAAA"),
            ),
            ContentPart(
                type="document",
                source=ContentSource(type="base64", media_type="application/pdf", data="B"),
            ),
        ],
    )
    assert format_openai_messages([message])[0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "[Document attachment: application/pdf]"},
    ]


def test_openai_duplicates_dropped_and_missing_results_patched() -> None:
    calls = [ToolCall("a", {}, "c1"), ToolCall("b", {}, "c2")]
    wire = format_openai_messages(
        [user("go"), agent(calls=calls), results(ok("c1", "x")), results(ok("c1", "again"))]
    )
    tool_messages = [m for m in wire if m["role"] == "tool"]
    assert sorted((m["tool_call_id"], m["content"]) for m in tool_messages) == [
        ("c1", "x"),
        ("c2", "No result available"),
    ]
    openai_valid(wire)


def test_openai_missing_ids() -> None:
    wire = format_openai_messages(
        [user("go"), agent(calls=[ToolCall("a", {})]), results(ok(None, "x"))]
    )
    minted = wire[1]["tool_calls"][0]["id"]
    assert minted.startswith("call_")
    assert {m["tool_call_id"] for m in wire if m["role"] == "tool"} == {"_unknown", minted}


def test_openai_trailing_reminder_after_tool_results_is_well_formed() -> None:
    reminder = user(REMINDER, framework_context="inbox")
    wire = format_openai_messages(
        [user("buy"), agent(calls=[ToolCall("a", {}, "c1")]), results(ok("c1", "ok")), reminder],
        "sys",
    )
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "user"]
    assert wire[-1]["content"] == REMINDER
    openai_valid(wire)


def test_openai_aborted_turn_then_new_question_is_well_formed() -> None:
    wire = format_openai_messages(
        [user("go"), agent(calls=[ToolCall("a", {}, "c1")]), user("still there?")]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "user"]
    openai_valid(wire)


def test_openai_reasoning_is_echoed_only_when_asked() -> None:
    thinking = Message(
        sender="agent",
        text="",
        tool_calls=[ToolCall("a", {}, "c1")],
        reasoning_content="I should look it up.",
    )
    history = [user("go"), thinking, results(ok("c1", "x"))]
    assert "reasoning_content" not in format_openai_messages(history)[1]
    assert format_openai_messages(history, echo_reasoning=True)[1]["reasoning_content"] == (
        "I should look it up."
    )
