"""Hooks, skills and subagents in the runtime (glove-core's extensions), with Glove's texts."""

from __future__ import annotations

from gloveapp.core import Message
from gloveapp.core.extensions import HookResult, parse_tokens
from tests.core.support import calls, make_glove


def test_it_binds_only_registered_directives():
    parsed = parse_tokens(
        "/plan then /usr/local and /brew-guide please", hooks={"plan": 1}, skills={"brew-guide": 1}
    )
    assert parsed.replaced == (
        "[invoked_extension__hook_plan] then /usr/local and "
        "[invoked_extension__skill_brew-guide] please"
    )
    assert (parsed.hooks, parsed.skills) == (["plan"], ["brew-guide"])


async def test_it_stores_a_user_invoked_skill_before_the_message():
    events: list = []
    glove, _model, store = make_glove(["Ok."], events=events)
    glove.define_skill("brew-guide", "Grind medium-fine.")
    await glove.process_request("/brew-guide how do I brew?")

    messages = await store.get_messages()
    assert messages[0].to_dict() == {
        "sender": "user",
        "text": "[Skill: brew-guide]\nGrind medium-fine.",
        "is_skill_injection": True,
    }
    assert messages[1].text == "[invoked_extension__skill_brew-guide] how do I brew?"
    assert ("skill_invoked", {"name": "brew-guide", "source": "user"}) in events


async def test_it_lets_the_agent_invoke_an_exposed_skill():
    glove, model, store = make_glove(
        [calls(("glove_invoke_skill", {"name": "brew-guide", "args": "v60"})), "Done."]
    )
    glove.define_skill(
        "brew-guide",
        lambda ctx: f"Guide for {ctx.args}",
        description="How to brew",
        expose_to_agent=True,
    )
    await glove.process_request("help")

    spec = next(t for t in model.calls[0].tools if t.name == "glove_invoke_skill")
    assert spec.description.endswith("Available skills:\n- brew-guide — How to brew")
    result = (await store.get_messages())[2].tool_results[0].result
    assert result.data == {"skill": "brew-guide", "content": "Guide for v60"}


async def test_it_short_circuits_with_a_hook():
    glove, model, store = make_glove([])

    async def stop(ctx):
        return HookResult(short_circuit=Message(sender="agent", text="Stopped by hook."))

    glove.define_hook("stop", stop)
    result = await glove.process_request("/stop now")

    assert result.text == "Stopped by hook."
    assert [m.text for m in await store.get_messages()] == [
        "[invoked_extension__hook_stop] now",
        "Stopped by hook.",
    ]
    assert model.calls == []


async def test_it_delegates_to_a_subagent_and_returns_its_answer():
    events: list = []
    child, child_model, _child_store = make_glove(["The beans are from Kenya."], label="child")
    parent, _parent_model, parent_store = make_glove(
        [calls(("glove_invoke_subagent", {"name": "roaster", "prompt": "Where from?"})), "Kenya."],
        events=events,
    )
    parent.define_subagent("roaster", lambda ctx: child, description="Knows the beans")
    await parent.process_request("Where are the beans from?")

    result = (await parent_store.get_messages())[2].tool_results[0].result
    assert result.data == {"subagent": "roaster", "content": "The beans are from Kenya."}
    assert child_model.calls[0].messages[-1].text == "Where from?"
    kinds = [kind for kind, _ in events]
    assert kinds.index("subagent_invoked") < kinds.index("subagent_completed")
    assert ("subagent_completed", {"name": "roaster", "status": "success"}) in events


async def test_it_names_the_registered_subagents_for_an_unknown_one():
    parent, _, store = make_glove(
        [calls(("glove_invoke_subagent", {"name": "nobody", "prompt": "x"})), "Ok."]
    )
    parent.define_subagent("roaster", lambda ctx: None)
    await parent.process_request("go")

    result = (await store.get_messages())[2].tool_results[0].result
    assert result.message == 'Subagent "nobody" is not registered. Use one of: roaster.'


async def test_it_runs_hooks_around_model_and_tool_calls():
    seen: list[str] = []
    glove, model, store = make_glove([calls(("check", {"x": 1}), ("check", {"x": 2})), "Done."])

    async def check(x: int) -> str:
        "Check."
        return f"ran {x}"

    from gloveapp.core import tool as make_tool
    from gloveapp.core.types import ToolResultData

    glove.fold(make_tool(check))

    def before_model(messages, tools):
        seen.append(f"model sees {len(messages)} messages and {len(tools)} tools")
        return [*messages, Message(sender="user", text="(from a hook)")]

    def before_tool(call, tool):
        seen.append(f"before {call.input_args['x']}")
        if call.input_args["x"] == 2:
            return ToolResultData.error("Blocked by policy.")
        return None

    async def after_tool(call, result):
        return ToolResultData.success(f"{result.data}!") if result.status == "success" else None

    glove.add_hook("before_model", before_model)
    glove.add_hook("before_tool", before_tool)
    glove.add_hook("after_tool", after_tool)
    glove.add_hook("after_model", lambda result: None)
    await glove.process_request("go")

    results = [r.result for r in (await store.get_messages())[2].tool_results]
    assert [(r.status, r.data, r.message) for r in results] == [
        ("success", "ran 1!", None),
        ("error", None, "Blocked by policy."),
    ]
    assert model.calls[0].messages[-1].text == "(from a hook)"
    assert seen[1:3] == ["before 1", "before 2"]
    assert "(from a hook)" not in [m.text for m in await store.get_messages()]  # not stored


async def test_it_keeps_a_skill_in_the_history_and_summarises_it_away_as_glove_does():
    from gloveapp.core import ScriptedTurn

    glove, model, store = make_glove(
        [ScriptedTurn("Medium-fine.", tokens_in=1000), "Fine."],
        limit=1000,
        compaction_script=["The user asked about grinding."],
    )
    glove.define_skill("brew-guide", "Grind medium-fine.")
    await glove.process_request("/brew-guide how fine?")
    await glove.process_request("And for espresso?")

    stored = await store.get_messages()
    assert stored[0].is_skill_injection  # stored history keeps it
    summary_prompt = next(c for c in model.calls if c.is_compaction_request).messages
    assert summary_prompt[0].text == "[Skill: brew-guide]\nGrind medium-fine."
    after = [m.text.split("\n")[0] for m in model.calls[-1].messages]
    assert after == ["[Conversation summary from compaction]", "And for espresso?"]
