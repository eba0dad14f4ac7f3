"""Rows <-> runtime objects for messages and tasks (serialization only).

Storage is JSON only: content, tool calls and tool results are stored as Glove's wire dicts
(never pickled), and every timestamp leaves here as ISO 8601 UTC with milliseconds and `Z`.
The `*_fields` functions validate with the input rules (`gloveapp.core.input_rules`) before
any write, so a refused message changes nothing.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gloveapp.core.input_rules import (
    MAX_FRAMEWORK_CONTEXT,
    MAX_MSG_ID,
    MAX_TASK_ID,
    check_extra_fields,
    check_json,
    check_text,
)
from gloveapp.core.types import TASK_STATUSES, iso_format
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import Task as CoreTask

if TYPE_CHECKING:
    from gloveapp.conversations.models import Message, Task


def iso_or_none(moment: datetime | None) -> str | None:
    return iso_format(moment) if moment is not None else None


# -- messages -----------------------------------------------------------------------------

# The columns a message is rebuilt from; `message_from_values` takes them in this order.
MESSAGE_VALUES = (
    "sender",
    "msg_id",
    "text",
    "content",
    "tool_calls",
    "tool_results",
    "is_compaction",
    "is_skill_injection",
    "framework_context",
    "reasoning_content",
    "extra",
)


def _check_extras(message: CoreMessage, where: str) -> None:
    """The bounds on unknown fields, at every level that keeps them."""
    check_extra_fields(message.extra, where)
    for i, part in enumerate(message.content or []):
        check_extra_fields(part.extra, f"{where}.content[{i}]")
        if part.source is not None:
            check_extra_fields(part.source.extra, f"{where}.content[{i}].source")
    for i, call in enumerate(message.tool_calls or []):
        check_extra_fields(call.extra, f"{where}.tool_calls[{i}]")
    for i, result in enumerate(message.tool_results or []):
        check_extra_fields(result.extra, f"{where}.tool_results[{i}]")
        check_extra_fields(result.result.extra, f"{where}.tool_results[{i}].result")


def message_fields(message: CoreMessage, index: int = 0) -> dict[str, Any]:
    """The column values of one runtime message, validated. Raises ValueError."""
    where = f"messages[{index}]"
    if not isinstance(message, CoreMessage):
        raise ValueError(f"{where} must be a Message, got {type(message).__name__}")
    if message.sender not in ("user", "agent"):
        raise ValueError(f"{where}.sender must be 'user' or 'agent', got {message.sender!r}")
    wire = message.to_dict()
    if message.id is not None:
        check_text(message.id, f"{where}.id", max_length=MAX_MSG_ID)
    if message.framework_context is not None:
        check_text(
            message.framework_context,
            f"{where}.framework_context",
            max_length=MAX_FRAMEWORK_CONTEXT,
        )
    if message.reasoning_content is not None:
        check_text(message.reasoning_content, f"{where}.reasoning_content")
    _check_extras(message, where)
    return {
        "sender": message.sender,
        "msg_id": message.id,
        "text": check_text(message.text, f"{where}.text"),
        "content": check_json(wire.get("content"), f"{where}.content"),
        "tool_calls": check_json(wire.get("tool_calls"), f"{where}.tool_calls"),
        "tool_results": check_json(wire.get("tool_results"), f"{where}.tool_results"),
        "is_compaction": bool(message.is_compaction),
        "is_skill_injection": bool(message.is_skill_injection),
        "framework_context": message.framework_context,
        "reasoning_content": message.reasoning_content,
        "extra": check_json(message.extra, where) or None,
    }


def message_from_values(values: tuple[Any, ...]) -> CoreMessage:
    """Rebuild a runtime message from a `values_list(*MESSAGE_VALUES)` row (no model instance)."""
    (
        sender,
        msg_id,
        text,
        content,
        tool_calls,
        tool_results,
        is_compaction,
        is_skill_injection,
        framework_context,
        reasoning_content,
        extra,
    ) = values
    # Unknown fields first: the columns are what the runtime interprets and always win.
    wire: dict[str, Any] = dict(extra or {})
    wire.update(sender=sender, text=text)
    if msg_id is not None:
        wire["id"] = msg_id
    if content is not None:
        wire["content"] = content
    if tool_calls:
        wire["tool_calls"] = tool_calls
    if tool_results:
        wire["tool_results"] = tool_results
    wire["is_compaction"] = is_compaction
    wire["is_skill_injection"] = is_skill_injection
    if framework_context is not None:
        wire["framework_context"] = framework_context
    if reasoning_content is not None:
        wire["reasoning_content"] = reasoning_content
    return CoreMessage.from_dict(wire)


def wire_from_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The wire dict a message's column values read back as (`message_from_values`), before
    they are written: what its `message.appended` event carries and its GET sends."""
    return message_from_values(tuple(values[name] for name in MESSAGE_VALUES)).to_dict()


def wire_json(wire: dict[str, Any]) -> str:
    """`wire` in exactly the text DRF's JSONRenderer writes for it with this project's
    settings (compact, UTF-8, U+2028/U+2029 escaped for JavaScript), so a history can be
    answered by joining stored texts, byte for byte what the DRF view answers."""
    text = json.dumps(wire, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def message_to_core(row: Message) -> CoreMessage:
    return message_from_values(tuple(getattr(row, name) for name in MESSAGE_VALUES))


# -- tasks --------------------------------------------------------------------------------


def task_fields(task: CoreTask, index: int = 0) -> dict[str, Any]:
    where = f"tasks[{index}]"
    if not isinstance(task, CoreTask):
        raise ValueError(f"{where} must be a Task, got {type(task).__name__}")
    if task.status not in TASK_STATUSES:
        raise ValueError(
            f"{where}.status must be one of {', '.join(TASK_STATUSES)}, got {task.status!r}"
        )
    return {
        "task_id": check_text(task.id, f"{where}.id", allow_empty=False, max_length=MAX_TASK_ID),
        "content": check_text(task.content, f"{where}.content"),
        "active_form": check_text(task.active_form, f"{where}.activeForm"),
        "status": task.status,
    }


def task_to_core(row: Task) -> CoreTask:
    return CoreTask(
        id=row.task_id, content=row.content, active_form=row.active_form, status=row.status
    )
