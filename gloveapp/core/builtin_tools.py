"""The tools Glove gives every agent whose store can hold their state, and ours.

`glove_post_to_inbox` (contract §3.1) and `glove_update_tasks` (§5), with the descriptions,
JSON schemas, result texts and id formats of the published glove-core 4.1.0. The schemas the
model sees are the exact ones 4.1.0 sends (zod's JSON Schema output); the pydantic models
beside them validate the input, strictly, as zod does (no "true" -> True coercion).
`glove_request_human` is this project's: an agent whose handoff is on hands the chat to a
person with it (the Django side gives it what it does, `create_request_human_tool`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gloveapp.core.approvals.inbox import inbox_decisions
from gloveapp.core.store import supports_inbox, supports_tasks
from gloveapp.core.tools import Tool, ToolContext
from gloveapp.core.types import (
    InboxItem,
    Task,
    ToolResultData,
    epoch_ms,
    new_inbox_item_id,
    now_iso,
)

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
INBOX_TOOL_NAME = "glove_post_to_inbox"
TASK_TOOL_NAME = "glove_update_tasks"
# What a customer reads instead of the built-in tools' names (the model reads the names).
BUILTIN_LABELS = {
    INBOX_TOOL_NAME: "Follow-up request",
    TASK_TOOL_NAME: "Task list",
    "glove_invoke_subagent": "Help from another agent",
    "glove_request_human": "Asking for a person",
}
REQUEST_HUMAN_TOOL_NAME = "glove_request_human"
REQUEST_HUMAN_DESCRIPTION = (
    "Hand this conversation to a person (a member of staff). Use it when the customer asks "
    "for a person, or when you cannot help them. After it, a person answers the customer "
    "and you stay silent until the conversation is handed back to you."
)
REQUEST_HUMAN_REASON_DESCRIPTION = "Why a person should take over, in a sentence"
REQUEST_HUMAN_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "reason": {
            "type": "string",
            "minLength": 1,
            "maxLength": 500,
            "description": REQUEST_HUMAN_REASON_DESCRIPTION,
        }
    },
    "required": ["reason"],
    "additionalProperties": False,
}


INBOX_TOOL_DESCRIPTION = (
    "Post an async request to the inbox. Use this when something cannot be resolved now but "
    "will be resolved later by an external service (e.g., inventory restock, payment "
    "confirmation, background job completion). Set blocking=true if you cannot proceed without "
    "the result. Set blocking=false if the result can arrive later and you can continue "
    "working.\n\nThe inbox item will be automatically checked each time the conversation "
    "continues. When it is resolved, the result will be provided to you as a tool result."
)
INBOX_TAG_DESCRIPTION = "Category label for this inbox item, e.g. 'restock_monitor'"
INBOX_REQUEST_DESCRIPTION = "Natural language description of what needs to happen or be monitored"
INBOX_BLOCKING_DESCRIPTION = "If true, you cannot continue until this item is resolved"
INBOX_CREATED_BLOCKING = "Inbox item created. This is blocking \u2014 you must wait for resolution."
INBOX_CREATED_NON_BLOCKING = "Inbox item created. This is non-blocking \u2014 you may continue."

TASK_TOOL_DESCRIPTION = (
    "Use this tool to create and manage a structured task list for the current session. Call "
    "this tool with the FULL updated list of tasks each time. Each task has:\n"
    '- content: imperative form describing the task ("Fix the bug", "Run tests")\n'
    '- activeForm: present continuous form shown during execution ("Fixing the bug", '
    '"Running tests")\n'
    '- status: "pending", "in_progress", or "completed"\n\n'
    "Only one task should be in_progress at a time. Mark tasks completed immediately after "
    "finishing them."
)

INBOX_TOOL_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "tag": {"type": "string", "minLength": 1, "description": INBOX_TAG_DESCRIPTION},
        "request": {"type": "string", "minLength": 1, "description": INBOX_REQUEST_DESCRIPTION},
        "blocking": {
            "default": False,
            "description": INBOX_BLOCKING_DESCRIPTION,
            "type": "boolean",
        },
    },
    # zod lists defaulted fields as required in its output-side schema.
    "required": ["tag", "request", "blocking"],
    "additionalProperties": False,
}

TASK_TOOL_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1},
                    "activeForm": {"type": "string", "minLength": 1},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["content", "activeForm", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


class PostToInboxInput(BaseModel):
    # zod objects strip unknown keys rather than failing; strict types like zod's.
    model_config = ConfigDict(extra="ignore", strict=True)

    tag: str = Field(min_length=1, description=INBOX_TAG_DESCRIPTION)
    request: str = Field(min_length=1, description=INBOX_REQUEST_DESCRIPTION)
    blocking: bool = Field(default=False, description=INBOX_BLOCKING_DESCRIPTION)


class TodoInput(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    content: str = Field(min_length=1)
    activeForm: str = Field(min_length=1)  # Glove's wire name
    status: Literal["pending", "in_progress", "completed"]


class UpdateTasksInput(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    todos: list[TodoInput]


async def post_to_inbox(
    params: PostToInboxInput, ctx: ToolContext, *, decisions: tuple[str, ...] | None = None
) -> ToolResultData:
    item = InboxItem(
        id=new_inbox_item_id(),
        tag=params.tag,
        request=params.request,
        response=None,
        status="pending",
        blocking=params.blocking,
        created_at=now_iso(),
        resolved_at=None,
        decisions=decisions,
    )
    # Like Glove, a store without an inbox is skipped silently; the tool is only registered
    # automatically when the store has one.
    if supports_inbox(ctx.store):
        await ctx.store.add_inbox_item(item)
    message = INBOX_CREATED_BLOCKING if params.blocking else INBOX_CREATED_NON_BLOCKING
    return ToolResultData.success({"inbox_item_id": item.id, "message": message})


async def update_tasks(params: UpdateTasksInput, ctx: ToolContext) -> ToolResultData:
    existing = await ctx.store.get_tasks() if supports_tasks(ctx.store) else []
    id_by_content: dict[str, str] = {}
    for task in existing:
        id_by_content.setdefault(task.content, task.id)
    # Glove mints `task_{epochMs}_{index}`; two calls in the same millisecond could then give a
    # new task the id of an existing one, so the millisecond is advanced past any id in use.
    taken = {task.id for task in existing}
    minted_at = epoch_ms()
    tasks = []
    for index, todo in enumerate(params.todos):
        task_id = id_by_content.get(todo.content)
        if task_id is None:
            while f"task_{minted_at}_{index}" in taken:
                minted_at += 1
            task_id = f"task_{minted_at}_{index}"
        taken.add(task_id)
        tasks.append(
            Task(id=task_id, content=todo.content, active_form=todo.activeForm, status=todo.status)
        )
    if supports_tasks(ctx.store):
        await ctx.store.add_tasks(tasks)
    return ToolResultData.success({"tasks": [task.to_dict() for task in tasks]})


def create_inbox_tool(*, decisions: Sequence[str] | None = None) -> Tool:
    """Glove's inbox tool. `decisions` (some of approve, reject, respond) are what a person
    may answer the items it posts with; the default is a text response only, as in Glove.
    The model's schema is Glove's either way."""
    declared = inbox_decisions(list(decisions) if decisions is not None else None)

    async def run(params: PostToInboxInput, ctx: ToolContext) -> ToolResultData:
        return await post_to_inbox(params, ctx, decisions=declared)

    return Tool(
        name=INBOX_TOOL_NAME,
        label=BUILTIN_LABELS[INBOX_TOOL_NAME],
        description=INBOX_TOOL_DESCRIPTION,
        run=post_to_inbox if declared is None else run,
        input_model=PostToInboxInput,
        json_schema=INBOX_TOOL_SCHEMA,
    )


def create_task_tool() -> Tool:
    return Tool(
        name=TASK_TOOL_NAME,
        label=BUILTIN_LABELS[TASK_TOOL_NAME],
        description=TASK_TOOL_DESCRIPTION,
        run=update_tasks,
        input_model=UpdateTasksInput,
        json_schema=TASK_TOOL_SCHEMA,
    )


class RequestHumanInput(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    reason: str = Field(min_length=1, max_length=500, description=REQUEST_HUMAN_REASON_DESCRIPTION)


def create_request_human_tool(hand_off: Callable[[str], Awaitable[str]]) -> Tool:
    """`glove_request_human`: `hand_off(reason)` puts the chat in a person's queue and
    returns what the model reads (that a person answers from here); a refusal (the chat is
    already a person's) is the tool's error, which the model reads too."""

    async def run(params: RequestHumanInput, ctx: ToolContext) -> ToolResultData:
        return ToolResultData.success({"message": await hand_off(params.reason)})

    return Tool(
        name=REQUEST_HUMAN_TOOL_NAME,
        label=BUILTIN_LABELS[REQUEST_HUMAN_TOOL_NAME],
        description=REQUEST_HUMAN_DESCRIPTION,
        run=run,
        input_model=RequestHumanInput,
        json_schema=REQUEST_HUMAN_SCHEMA,
        retry_safe=False,
    )
