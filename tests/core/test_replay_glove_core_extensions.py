"""Glove's extension scenarios (hooks, skills, subagents, content skills), as the published
glove-core 4.1.0 runs them (`fixtures/glove_core_4_1_0_extensions.json`, made by
`reference/extensions.mjs`), replayed through our runtime: the same prompts (messages and
tools offered), stored messages, returned results and events.

One deliberate difference is applied to the expectation: Decision 1 registers
`glove_post_to_inbox` beside `glove_update_tasks` when the store has an inbox.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gloveapp.core import CompactionConfig, Glove, MemoryStore, Message, ScriptedModel, ToolCall
from gloveapp.core.builtin_tools import create_inbox_tool
from gloveapp.core.content_skills import ContentSkill, use_read_skill
from gloveapp.core.extensions import HookResult

FIXTURE = Path(__file__).parent / "fixtures" / "glove_core_4_1_0_extensions.json"
SCENARIOS = {s["name"]: s for s in json.loads(FIXTURE.read_text())["scenarios"]}
SYSTEM_PROMPT = "You are Brew, the assistant of a small coffee shop."
EXTENSION_EVENTS = {
    "hook_invoked",
    "skill_invoked",
    "subagent_invoked",
    "subagent_completed",
    "tool_use_result",
}
INBOX_TOOL = create_inbox_tool()


def build(label: str, steps: list[Any]) -> tuple[Glove, ScriptedModel, MemoryStore, list]:
    store = MemoryStore(f"session_{label}")
    model = ScriptedModel(steps, label=label)
    glove = Glove(
        store=store,
        model=model,
        system_prompt=SYSTEM_PROMPT,
        compaction_config=CompactionConfig("Summarize."),
    )
    events: list = []

    def record(kind: str, data: dict) -> None:
        if kind in EXTENSION_EVENTS:
            data = copy.deepcopy(data)
            data.pop("duration_ms", None)
            events.append({"type": kind, "data": data})

    glove.add_subscriber(record)
    return glove, model, store, events


def agent(text: str = "", *calls: tuple[str, dict]) -> Message:
    return Message(
        sender="agent",
        text=text,
        tool_calls=[ToolCall(tool_name=name, input_args=args) for name, args in calls] or None,
    )


def setup_user_skill(glove: Glove) -> None:
    glove.define_skill("brew-guide", lambda ctx: f"Brewing guide. Asked: {ctx.parsed_text}")


def setup_multimodal_skill(glove: Glove) -> None:
    glove.define_skill(
        "menu",
        lambda ctx: [
            {"type": "text", "text": "Today's menu"},
            {
                "type": "image",
                "source": {
                    "type": "url",
                    "media_type": "image/png",
                    "url": "https://example.com/menu.png",
                },
            },
        ],
    )


def setup_hook_rewrite(glove: Glove) -> None:
    glove.define_hook(
        "polite",
        lambda ctx: HookResult(rewrite_text=f"Please: {ctx.parsed_text} (raw: {ctx.raw_text})"),
    )
    glove.define_skill("polite", "never used")


def setup_hook_short_circuit(glove: Glove) -> None:
    glove.define_hook(
        "closed",
        lambda ctx: HookResult(short_circuit=Message(sender="agent", text="We are closed today.")),
    )


def setup_agent_skill(glove: Glove) -> None:
    glove.define_skill(
        "brew-guide",
        lambda ctx: f"Guide ({ctx.source}) for {ctx.args}; parsed: {ctx.parsed_text}",
        description="How to brew by hand",
        expose_to_agent=True,
    )
    glove.define_skill("latte", "", expose_to_agent=True)
    glove.define_skill("secret", "hidden")


def setup_subagent(glove: Glove) -> None:
    def child(label: str, text: str):
        return lambda ctx: build(label, [text])[0].build()

    def broken(ctx):
        raise RuntimeError("no roaster today")

    glove.define_subagent(
        "roaster", child("roaster_child", "Medium, 12 minutes."), description="Knows every roast"
    )
    glove.define_subagent("broken", broken)
    glove.define_subagent("quiet", child("quiet_child", ""))


SKILLS = [
    ContentSkill(
        name="python-debug",
        description="Diagnose Python errors & apply <fix> patterns.",
        content="# Python Debugging\nRead the traceback.",
        sections={"api-reference": "# API\nraise", "examples": "# Examples\n1/0"},
        priority=2,
    ),
    ContentSkill(
        name="git-flow",
        description="Branching rules.",
        content="# Git\nRebase.",
        path="/skills/git-flow",
    ),
    ContentSkill(
        name="hidden-one", description="Not listed.", content="Secret content.", hidden=True
    ),
]


def setup_content_skills(glove: Glove) -> None:
    use_read_skill(glove, SKILLS)


def setup_content_skills_budget(glove: Glove) -> None:
    use_read_skill(
        glove,
        [
            ContentSkill(
                name=f"skill-{i:02d}",
                description=" ".join([f"Skill number {i}"] * 4),
                content=f"Body {i}",
                priority=i % 3,
            )
            for i in range(12)
        ],
        listing_budget_tokens=100,
    )


def script_from(scenario: dict) -> list[Message]:
    """What the 4.1.0 model replied at each call (from the stored agent messages)."""
    stored = [Message.from_dict(m) for m in scenario["stored_messages"]]
    return [
        Message(
            sender="agent",
            text=m.text,
            tool_calls=[
                ToolCall(tool_name=c.tool_name, input_args=c.input_args)
                for c in (m.tool_calls or [])
            ]
            or None,
        )
        for m in stored
        if m.sender == "agent" and m.text not in {"We are closed today."}
    ]


def returned_dict(result: Any) -> dict:
    if isinstance(result, Message):  # a hook ended the request
        return result.to_dict()
    return {
        "messages": [m.to_dict() for m in result.messages],
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
    }


def with_inbox_tool(tools: list[dict]) -> list[dict]:
    """Decision 1: our store has an inbox, so glove_post_to_inbox is offered too."""
    names = [t["name"] for t in tools]
    position = names.index("glove_update_tasks") + 1
    inbox = {
        "name": INBOX_TOOL.name,
        "description": INBOX_TOOL.description,
        "input_schema": INBOX_TOOL.json_schema,
    }
    return [*tools[:position], inbox, *tools[position:]]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_it_matches_glove_core_4_1_0(name):
    scenario = SCENARIOS[name]
    glove, model, store, events = build(name, script_from(scenario))
    globals()[f"setup_{name}"](glove)
    glove.build()

    returned = [returned_dict(await glove.process_request(r)) for r in scenario["requests"]]

    stored = [m.to_dict() for m in await store.get_messages()]
    for message in stored:
        for result in message.get("tool_results") or []:
            result.pop("duration_ms", None)
    assert stored == scenario["stored_messages"]
    assert returned == scenario["returned"]
    assert events == scenario["events"]
    assert len(model.calls) == len(scenario["model_calls"])
    for ours, theirs in zip(model.calls, scenario["model_calls"], strict=True):
        sent = [m.to_dict() for m in ours.messages]
        for message in sent:
            for result in message.get("tool_results") or []:
                result.pop("duration_ms", None)
        assert sent == theirs["messages"]
        offered = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in ours.tools
        ]
        assert offered == with_inbox_tool(theirs["tools"])
