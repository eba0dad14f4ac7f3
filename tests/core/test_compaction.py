"""Context compaction (contract §4 with Decision 4)."""

from __future__ import annotations

from gloveapp.core import InboxItem, MemoryStore, ScriptedTurn, tool
from tests.core.support import SUMMARY_INSTRUCTIONS, calls, make_glove


@tool(description="Look up stock.")
async def check_stock(product: str) -> dict:
    return {"product": product, "in_stock": False}


def turn(reply, tokens_in, tokens_out=0):
    return ScriptedTurn(reply, tokens_in=tokens_in, tokens_out=tokens_out)


async def test_it_compacts_after_tool_results_once_the_limit_is_reached():
    events = []
    store = MemoryStore("s")
    await store.add_inbox_item(InboxItem(id="i1", tag="restock_watch", request="Watch AA"))
    await store.add_inbox_item(
        InboxItem(id="i2", tag="payment", request="Confirm #7", blocking=True)
    )
    glove, model, _ = make_glove(
        [turn(calls(("check_stock", {"product": "AA"})), 1000), turn("AA is out.", 10)],
        store=store,
        tools=[check_stock],
        limit=1000,
        compaction_script=[turn("User asked about AA.", 500, 40)],
        events=events,
    )
    await glove.process_request("Is AA in stock?")
    summary_call = model.calls[1]
    assert summary_call.is_compaction_request
    assert summary_call.tools is None
    assert summary_call.messages[-1].to_dict() == {
        "sender": "user",
        "text": SUMMARY_INSTRUCTIONS,
        "is_compaction_request": True,
    }
    summary = (await store.get_messages())[3]
    assert summary.is_compaction
    assert summary.text == (
        "[Conversation summary from compaction]\n\nUser asked about AA.\n\n"
        "[Pending inbox items \u2014 being monitored by external services]\n"
        "- [restock_watch] non-blocking: Watch AA\n"
        "- [payment] BLOCKING: Confirm #7\n\n\n"
        "[End of summary - the conversation continues from here]"
    )
    # The next call sees the summary on (plus the transient blocking reminder).
    assert [m.text for m in model.calls[2].messages[:-1]] == [summary.text]
    # Counters reset before the summary call; only its output tokens, then the next call.
    assert await store.get_token_count() == 40 + 10
    assert await store.get_turn_count() == 1
    kinds = [kind for kind, _ in events]
    assert kinds[2:6] == ["tool_use_result", "compaction_start", "model_response", "compaction_end"]
    start, end = events[3][1], events[5][1]
    assert start == {"current_token_consumption": 1000}
    assert end["current_token_consumption"] == 40
    assert end["summary_message"] == summary.to_dict()
    assert end["consumption"] == {"tokens_in": 500, "tokens_out": 40}


async def test_it_reports_the_summary_calls_cache_tokens_in_compaction_end():
    events = []
    summary_turn = ScriptedTurn(
        "Summary.",
        tokens_in=500,
        tokens_out=40,
        cache_creation_input_tokens=120,
        cache_read_input_tokens=300,
    )
    glove, _, _ = make_glove(
        [turn("Hello!", 1000), "Fine."],
        limit=1000,
        compaction_script=[summary_turn],
        events=events,
    )
    await glove.process_request("Hi")
    end = next(payload for kind, payload in events if kind == "compaction_end")
    assert end["consumption"] == {
        "tokens_in": 500,
        "tokens_out": 40,
        "cache_creation_input_tokens": 120,
        "cache_read_input_tokens": 300,
    }


async def test_it_says_when_no_summary_was_generated_and_omits_an_empty_inbox_block():
    glove, _, store = make_glove(
        [turn(calls(("check_stock", {"product": "AA"})), 1000), "ok"],
        tools=[check_stock],
        limit=1000,
        compaction_script=[""],
    )
    await glove.process_request("hi")
    summary = next(m for m in await store.get_messages() if m.is_compaction)
    assert summary.text == (
        "[Conversation summary from compaction]\n\nNo summary was generated\n\n"
        "[End of summary - the conversation continues from here]"
    )


async def test_it_compacts_before_storing_a_tool_call_once_ninety_percent_is_used():
    events = []
    glove, model, store = make_glove(
        [turn("Hello!", 900), turn(calls(("check_stock", {"product": "AA"})), 10), "Out."],
        tools=[check_stock],
        limit=1000,
        compaction_script=["Greeted; asked about AA."],
        events=events,
    )
    await glove.process_request("Hi")
    await glove.process_request("Is AA in stock?")
    stored = [m.to_dict() for m in await store.get_messages()]
    assert [m.get("is_compaction", False) for m in stored] == [False] * 3 + [True] + [False] * 3
    assert stored[4]["tool_calls"][0]["tool_name"] == "check_stock"
    assert [m.sender for m in model.calls[-1].messages] == ["user", "agent", "user"]
    kinds = [kind for kind, _ in events][2:]
    assert kinds[:5] == [
        "model_response",
        "compaction_start",
        "model_response",
        "compaction_end",
        "token_consumption",
    ]


async def test_it_compacts_a_chat_without_tool_calls_once_the_limit_is_reached():
    # Decision 4: glove-core only compacts on tool-calling iterations.
    glove, model, store = make_glove(
        [turn("Hello!", 1000), "Fine."], limit=1000, compaction_script=["Greeted."]
    )
    await glove.process_request("Hi")
    assert (await store.get_messages())[-1].is_compaction
    await glove.process_request("How are you?")
    assert [m.text.split("\n")[0] for m in model.calls[-1].messages] == [
        "[Conversation summary from compaction]",
        "How are you?",
    ]


async def test_it_does_not_compact_below_the_limit():
    glove, model, store = make_glove([turn("Hello!", 899)], limit=1000)
    await glove.process_request("Hi")
    assert not any(m.is_compaction for m in await store.get_messages())
    assert len(model.calls) == 1


async def test_it_summarises_only_from_the_last_marker_and_keeps_full_history():
    glove, model, store = make_glove(
        [turn("one", 1000), turn("two", 1000)],
        limit=1000,
        compaction_script=["First summary.", "Second summary."],
    )
    await glove.process_request("a")
    await glove.process_request("b")
    second_summary_prompt = model.calls[3].messages
    assert second_summary_prompt[0].text.startswith(
        "[Conversation summary from compaction]\n\nFirst summary."
    )
    assert [m.text for m in second_summary_prompt[1:3]] == ["b", "two"]
    assert len(await store.get_messages()) == 6
    assert len(await store.get_context_messages()) == 1


async def test_it_can_be_forced():
    glove, _, store = make_glove(["hello"], compaction_script=["Summary."])
    await glove.process_request("hi")
    summary = await glove.force_compaction()
    assert summary.is_compaction
    assert (await store.get_context_messages()) == [summary]
