"""Small builders shared by the core tests."""

from __future__ import annotations

from typing import Any

from gloveapp.core import (
    CompactionConfig,
    Glove,
    MemoryStore,
    Message,
    ScriptedModel,
    ToolCall,
)

SUMMARY_INSTRUCTIONS = "Summarize the conversation."


def calls(*pairs: tuple[str, Any], text: str = "") -> Message:
    """An agent reply that calls tools: calls(("check_stock", {"product": "AA"}), ...)."""
    return Message(
        sender="agent",
        text=text,
        tool_calls=[ToolCall(tool_name=name, input_args=args) for name, args in pairs],
    )


def make_glove(
    script: list[Any],
    *,
    store: Any = None,
    tools: list[Any] = (),
    max_turns: int = 120,
    limit: int = 100_000,
    compaction_script: list[Any] | None = None,
    events: list[tuple[str, dict]] | None = None,
    **model_options: Any,
) -> tuple[Glove, ScriptedModel, Any]:
    store = store if store is not None else MemoryStore("session_test")
    model = ScriptedModel(script, compaction_script=compaction_script, **model_options)
    glove = Glove(
        store=store,
        model=model,
        system_prompt="You are a test agent.",
        compaction_config=CompactionConfig(
            SUMMARY_INSTRUCTIONS, max_turns=max_turns, compaction_context_limit=limit
        ),
    )
    for tool in tools:
        glove.fold(tool)
    if events is not None:
        glove.add_subscriber(lambda kind, data: events.append((kind, data)))
    return glove.build(), model, store
