"""A lead agent that delegates to a "roaster" subagent, with scripted models that read the
conversation (not a position in a script), so a turn run again after its worker was killed
takes up where the stored conversation is. Used in this process (`configure`) and by the
worker processes of the restart test (`tests.agents.subagent_settings`)."""

from __future__ import annotations

from gloveapp.core import Message
from gloveapp.core.providers.registry import register_model_provider
from gloveapp.core.providers.scripted import ScriptedModel
from gloveapp.core.tools import ToolContext, tool
from tests.core.support import calls

LEAD_MODEL = "ext-lead"
ROASTER_MODEL = "ext-roaster"
ASK_PROMPT = "Which roast for the Kenya AA?"


@tool
async def ask_roast(ctx: ToolContext) -> str:
    "Ask the customer which roast they want."
    answer = await ctx.display.push_and_wait(input={"question": ASK_PROMPT})
    return f"roast: {answer}"


def _last(prompt: list[Message]) -> Message:
    return prompt[-1]


def lead_step(prompt: list[Message]) -> Message | str:
    last = _last(prompt)
    if last.tool_results:
        data = last.tool_results[0].result.data
        content = (
            data.get("content") if isinstance(data, dict) else last.tool_results[0].result.message
        )
        return f"The roaster says: {content}"
    return calls(("glove_invoke_subagent", {"name": "roaster", "prompt": "Roast the Kenya AA."}))


def roaster_step(prompt: list[Message]) -> Message | str:
    last = _last(prompt)
    if last.tool_results:
        return f"Roasted ({last.tool_results[0].result.data})."
    return calls(("ask_roast", {}))


def lead_model(model: str = "", **kwargs: object) -> ScriptedModel:
    return ScriptedModel([lead_step] * 10, label="lead")


def roaster_model(model: str = "", **kwargs: object) -> ScriptedModel:
    return ScriptedModel([roaster_step] * 10, label="roaster")


def lead_agent() -> dict:
    return {"title": "Lead", "system_prompt": "You delegate roasting."}


def roaster_agent() -> dict:
    return {"title": "Roaster", "system_prompt": "You roast beans.", "tools": [ask_roast]}


def register_models() -> None:
    register_model_provider(LEAD_MODEL, lead_model, replace=True)
    register_model_provider(ROASTER_MODEL, roaster_model, replace=True)


def agents(roaster_extra: dict | None = None) -> dict:
    return {
        "lead": {
            "factory": "tests.agents.subagent_agents.lead_agent",
            "model": LEAD_MODEL,
            "subagents": [{"name": "roaster", "agent": "roaster", "description": "Roasts beans"}],
        },
        "roaster": {
            "factory": "tests.agents.subagent_agents.roaster_agent",
            "model": ROASTER_MODEL,
            **(roaster_extra or {}),
        },
    }
