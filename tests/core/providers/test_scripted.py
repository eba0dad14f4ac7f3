"""The scripted model's answers beyond its script, and its streaming mode."""

from __future__ import annotations

import pytest

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.providers.scripted import ScriptedModel, ScriptedTurn, ScriptExhaustedError
from gloveapp.core.types import Message, ToolCall

ASK = [Message(sender="user", text="hello")]
TOOLS = [ToolSpec(name="check_stock", description="")]


async def test_it_answers_with_respond_once_the_script_is_spent(recorder):
    model = ScriptedModel(
        ["from the script"], respond=lambda messages, tools: f"{len(tools or [])} tool(s) offered"
    )

    first = await model.prompt(ASK, TOOLS, recorder)
    second = await model.prompt(ASK, TOOLS, recorder)
    third = await model.prompt(ASK, None, recorder)

    assert [r.messages[0].text for r in (first, second, third)] == [
        "from the script",
        "1 tool(s) offered",
        "0 tool(s) offered",
    ]


async def test_it_still_runs_out_without_respond(recorder):
    model = ScriptedModel(["only one"])
    await model.prompt(ASK, None, recorder)

    with pytest.raises(ScriptExhaustedError):
        await model.prompt(ASK, None, recorder)


async def test_it_reports_a_reply_as_a_streaming_adapter_when_asked(recorder):
    call = ToolCall(tool_name="check_stock", input_args={"coffee": "Kenya AA"}, id="toolu_1")
    reply = Message(sender="agent", text="one two three four five six seven", tool_calls=[call])
    model = ScriptedModel([ScriptedTurn(reply, tokens_in=7, tokens_out=3)], stream=True)

    await model.prompt(ASK, TOOLS, recorder)

    assert recorder.types == ["text_delta", "text_delta", "tool_use", "model_response_complete"]
    assert "".join(p["text"] for p in recorder.of("text_delta")) == reply.text
    assert recorder.of("tool_use") == [
        {"id": "toolu_1", "name": "check_stock", "input": {"coffee": "Kenya AA"}}
    ]
    assert recorder.of("model_response_complete")[0]["tokens_in"] == 7


async def test_it_reports_one_model_response_by_default(recorder):
    await ScriptedModel(["one two three four five six seven"]).prompt(ASK, None, recorder)

    assert recorder.types == ["model_response"]
