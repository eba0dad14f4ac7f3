"""Hooks, skills and subagents (glove-core's `extensions.ts`): their texts, the `/name`
directive parser, and the two dispatch tools `glove_invoke_skill` and
`glove_invoke_subagent`. `Glove.define_hook`, `define_skill` and `define_subagent` register
them; `Glove.process_request` runs the directives a user's message names.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from gloveapp.core.abort import AbortSignal
from gloveapp.core.display import DisplayManager
from gloveapp.core.events import Subscriber
from gloveapp.core.store import StoreAdapter
from gloveapp.core.tools import Tool, ToolContext
from gloveapp.core.types import ContentPart, Message, ModelResult, ToolResultData

SKILL_TOOL_NAME = "glove_invoke_skill"
SUBAGENT_TOOL_NAME = "glove_invoke_subagent"

HOOK_INVOKED = "hook_invoked"
SKILL_INVOKED = "skill_invoked"
SUBAGENT_INVOKED = "subagent_invoked"
SUBAGENT_COMPLETED = "subagent_completed"

# `/name` at the start or after whitespace, followed by whitespace or the end.
TOKEN_RE = re.compile(r"(^|\s)/([A-Za-z][\w-]*)(?=\s|$)")


class Glove(Protocol):
    """What an extension reaches of the running `gloveapp.core.glove.Glove`, which imports
    this module (so it is described here, not imported)."""

    skills: dict[str, RegisteredSkill]
    subagents: dict[str, RegisteredSubAgent]

    @property
    def subscribers(self) -> list[Subscriber]: ...

    def controls(self) -> AgentControls: ...

    async def emit(self, event_type: str, payload: dict[str, Any]) -> None: ...

    async def force_compaction(self) -> Message: ...


@dataclass(slots=True)
class AgentControls:
    """What a hook, skill or subagent factory may reach of the running agent."""

    glove: Glove
    store: StoreAdapter
    display_manager: DisplayManager

    async def force_compaction(self) -> Message:
        return await self.glove.force_compaction()


@dataclass(slots=True)
class HookContext:
    name: str
    raw_text: str
    parsed_text: str
    controls: AgentControls
    abort: AbortSignal | None = None


@dataclass(slots=True)
class HookResult:
    """`rewrite_text` replaces the user's text; `short_circuit` (a Message, or a ModelResult)
    ends the request without the agent loop: the user message and it are stored, it is
    returned."""

    rewrite_text: str | None = None
    short_circuit: Message | ModelResult | None = None


@dataclass(slots=True)
class SkillContext:
    name: str
    # source "user": the message with its directives replaced; "agent": the args or "".
    parsed_text: str
    source: Literal["user", "agent"]
    controls: AgentControls
    args: str | None = None


HookHandler = Callable[[HookContext], Awaitable[HookResult | None] | HookResult | None]
SkillHandler = Callable[[SkillContext], Awaitable[Any] | Any]


@dataclass(slots=True)
class RegisteredSkill:
    handler: SkillHandler
    description: str | None = None
    expose_to_agent: bool = False


@dataclass(slots=True)
class SubAgentFactoryContext:
    name: str
    prompt: str
    parent_store: StoreAdapter
    parent_controls: AgentControls
    # The tool call that delegates (a durable child is keyed by it).
    call_id: str | None = None


SubAgentFactory = Callable[[SubAgentFactoryContext], Any]


@dataclass(slots=True)
class RegisteredSubAgent:
    factory: SubAgentFactory
    description: str | None = None


@dataclass(slots=True)
class ParsedTokens:
    replaced: str
    hooks: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def parse_tokens(text: str, *, hooks: Mapping[str, Any], skills: Mapping[str, Any]) -> ParsedTokens:
    """Bind `/name` directives to registered hooks (first) or skills; each bound one becomes
    `[invoked_extension__<hook|skill>_<name>]`, unbound ones (`/usr/local`) stay as typed."""
    parsed = ParsedTokens(replaced="")
    cursor = 0
    pieces: list[str] = []
    for match in TOKEN_RE.finditer(text):
        lead, name = match.group(1), match.group(2)
        if name in hooks:
            parsed.hooks.append(name)
            kind = "hook"
        elif name in skills:
            parsed.skills.append(name)
            kind = "skill"
        else:
            continue
        token_start = match.start() + len(lead)
        pieces.append(text[cursor:token_start])
        pieces.append(f"[invoked_extension__{kind}_{name}]")
        cursor = match.end()
    pieces.append(text[cursor:])
    parsed.replaced = "".join(pieces)
    return parsed


def _parts(injection: Any) -> list[ContentPart]:
    return [p if isinstance(p, ContentPart) else ContentPart.from_dict(p) for p in injection]


def _text_of(parts: list[ContentPart]) -> str:
    return "\n".join(p.text for p in parts if p.type == "text" and p.text)


def format_skill_message(name: str, injection: str | list[Any]) -> Message:
    """A skill's content as the synthetic user message stored before the user's own."""
    if isinstance(injection, str):
        return Message(sender="user", text=f"[Skill: {name}]\n{injection}", is_skill_injection=True)
    parts = _parts(injection)
    return Message(
        sender="user",
        text=f"[Skill: {name}]\n{_text_of(parts) or '[multimodal skill content]'}",
        content=[ContentPart(type="text", text=f"[Skill: {name}]"), *parts],
        is_skill_injection=True,
    )


def _exposed(skills: Mapping[str, RegisteredSkill]) -> list[str]:
    return [name for name, skill in skills.items() if skill.expose_to_agent]


def render_skill_tool_description(skills: Mapping[str, RegisteredSkill]) -> str:
    exposed = _exposed(skills)
    head = (
        "Invoke a registered skill to pull its contextual instructions or content into this turn. "
    )
    if not exposed:
        return head + "No skills are currently exposed; calling this tool will return an error."
    lines = [
        f"- {name}" + (f" — {skills[name].description}" if skills[name].description else "")
        for name in exposed
    ]
    return (
        head + "The skill's content is returned as the tool result and remains available for "
        "the rest of the conversation. Available skills:\n" + "\n".join(lines)
    )


def render_subagent_tool_description(subagents: Mapping[str, RegisteredSubAgent]) -> str:
    head = "Invoke a registered subagent with a task prompt. "
    if not subagents:
        return (
            head + "No subagents are currently registered; calling this tool will return an error."
        )
    lines = [
        f"- {name}" + (f" — {entry.description}" if entry.description else "")
        for name, entry in subagents.items()
    ]
    return (
        head + "The subagent runs in an isolated context — its only input is the prompt you "
        "supply, so make it self-contained. The subagent's final output is returned verbatim "
        "as this tool's result.\n\n"
        'When the user @-mentions a subagent name (e.g. "@reviewer please look at this"), '
        "invoke the corresponding subagent here.\n\n"
        "Available subagents:\n" + "\n".join(lines)
    )


class InvokeSkillInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(
        description="The name of the skill to invoke. Must match one of the skills listed in "
        "this tool's description."
    )
    args: str | None = Field(
        default=None, description="Optional free-form arguments to pass to the skill handler."
    )


class InvokeSubagentInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(
        description="The name of the subagent to invoke. Must match one of the subagents "
        "listed in this tool's description."
    )
    prompt: str = Field(
        description="The task prompt to hand to the subagent. Be specific and self-contained "
        "— the subagent does not see the parent conversation."
    )


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# What zod's toJSONSchema gives the model for Glove's two input schemas.
INVOKE_SKILL_SCHEMA = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": InvokeSkillInput.model_fields["name"].description,
        },
        "args": {
            "type": "string",
            "description": InvokeSkillInput.model_fields["args"].description,
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}
INVOKE_SUBAGENT_SCHEMA = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": InvokeSubagentInput.model_fields["name"].description,
        },
        "prompt": {
            "type": "string",
            "description": InvokeSubagentInput.model_fields["prompt"].description,
        },
    },
    "required": ["name", "prompt"],
    "additionalProperties": False,
}


def create_skill_invoke_tool(glove: Glove) -> Tool:
    skills = glove.skills

    async def run(validated: InvokeSkillInput, ctx: ToolContext) -> ToolResultData:
        entry = skills.get(validated.name)
        if entry is None or not entry.expose_to_agent:
            known = ", ".join(_exposed(skills)) or "(none)"
            return ToolResultData.error(
                f'Skill "{validated.name}" is not available. Use one of: {known}.'
            )
        await glove.emit(
            SKILL_INVOKED,
            {"name": validated.name, "source": "agent"}
            | ({"args": validated.args} if validated.args is not None else {}),
        )
        injection = await maybe_await(
            entry.handler(
                SkillContext(
                    name=validated.name,
                    parsed_text=validated.args or "",
                    args=validated.args,
                    source="agent",
                    controls=glove.controls(),
                )
            )
        )
        if isinstance(injection, str):
            content = injection or "[skill produced no text content]"
            return ToolResultData.success({"skill": validated.name, "content": content})
        parts = _parts(injection)
        return ToolResultData.success(
            {"skill": validated.name, "content": _text_of(parts) or "[non-text skill content]"},
            render_data={"skill": validated.name, "parts": [p.to_dict() for p in parts]},
        )

    return Tool(
        name=SKILL_TOOL_NAME,
        description=render_skill_tool_description(skills),
        run=run,
        input_model=InvokeSkillInput,
        json_schema=INVOKE_SKILL_SCHEMA,
    )


def agent_text(result: ModelResult | Message) -> str:
    if isinstance(result, Message):
        return result.text or ""
    last = next((m for m in reversed(result.messages) if m.sender == "agent"), None)
    return (last.text or "") if last is not None else ""


def create_subagent_invoke_tool(glove: Glove) -> Tool:
    subagents = glove.subagents

    async def run(validated: InvokeSubagentInput, ctx: ToolContext) -> ToolResultData:
        entry = subagents.get(validated.name)
        if entry is None:
            known = ", ".join(subagents) or "(none)"
            return ToolResultData.error(
                f'Subagent "{validated.name}" is not registered. Use one of: {known}.'
            )
        controls = glove.controls()
        try:
            child = await maybe_await(
                entry.factory(
                    SubAgentFactoryContext(
                        name=validated.name,
                        prompt=validated.prompt,
                        parent_store=controls.store,
                        parent_controls=controls,
                        call_id=ctx.call_id,
                    )
                )
            )
        except Exception as error:
            return ToolResultData.error(
                f'Subagent "{validated.name}" factory threw: {_message_of(error)}'
            )
        subscribers = glove.subscribers
        for subscriber in subscribers:
            child.add_subscriber(subscriber)
        try:
            result = await child.process_request(validated.prompt, ctx.abort)
        except Exception as error:
            if type(error).__name__ == "AbortError":
                raise
            return ToolResultData.error(f'Subagent "{validated.name}" failed: {_message_of(error)}')
        finally:
            for subscriber in subscribers:
                child.remove_subscriber(subscriber)
        text = agent_text(result)
        return ToolResultData.success(
            {"subagent": validated.name, "content": text or "[subagent produced no text content]"}
        )

    return Tool(
        name=SUBAGENT_TOOL_NAME,
        description=render_subagent_tool_description(subagents),
        run=run,
        input_model=InvokeSubagentInput,
        json_schema=INVOKE_SUBAGENT_SCHEMA,
    )


def _message_of(error: BaseException) -> str:
    return str(error)
