"""Rows <-> runtime objects, and the checks that keep bad input out of the database.

Storage is JSON only: content, tool calls and tool results are stored as Glove's wire dicts
(never pickled), and every timestamp leaves here as ISO 8601 UTC with milliseconds and `Z`.
Validation happens here, before any write, so a refused message changes nothing.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gloveapp.core.types import INBOX_STATUSES, TASK_STATUSES, iso_format, parse_iso
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import Task as CoreTask

if TYPE_CHECKING:
    from gloveapp.conversations.models import Message, Task
    from inbox.models import InboxItem

# Column widths of the models, checked here so the database never truncates or refuses.
MAX_ID = 128
MAX_MSG_ID = 200
MAX_TAG = 200
MAX_TASK_ID = 200
MAX_FRAMEWORK_CONTEXT = 50


def check_text(value: Any, field: str, *, allow_empty: bool = True, max_length: int = 0) -> str:
    """A string the database can hold: PostgreSQL refuses NUL characters outright, and a
    lone surrogate (U+D800-U+DFFF) is not encodable as UTF-8 by any backend or channel layer."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ValueError(f"{field} must not be empty")
    if max_length and len(value) > max_length:
        raise ValueError(f"{field} is longer than {max_length} characters")
    if "\x00" in value:
        raise ValueError(f"{field} must not contain NUL characters")
    if not _utf8_encodable(value):
        raise ValueError(f"{field} must not contain lone surrogate characters")
    return value


def check_json(value: Any, field: str) -> Any:
    """JSON that every backend stores the same way (and the live relay can send): no
    NaN/Infinity, no NUL characters, no lone surrogates, in values or keys."""
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} is not storable as JSON: {exc}") from None
    # json.dumps always escapes control characters, so a NUL shows as `\u0000`; a lone
    # surrogate stays a raw code point, which UTF-8 cannot encode. Both are cheap tests of
    # the whole document; only a suspect one is walked to name the offending field.
    if "\\u0000" in encoded or not _utf8_encodable(encoded):
        path, problem = _first_unstorable(value, field)
        if problem:
            raise ValueError(f"{path} must not contain {problem}")
    return value


def _utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_unstorable(value: Any, path: str) -> tuple[str, str]:
    """Where in a JSON value the first NUL or lone surrogate is (value known to hold one)."""
    if isinstance(value, str):
        if "\x00" in value:
            return path, "NUL characters"
        if not _utf8_encodable(value):
            return path, "lone surrogate characters"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and ("\x00" in key or not _utf8_encodable(key)):
                return _first_unstorable(key, path)
            found = _first_unstorable(item, f"{path}.{key}")
            if found[1]:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _first_unstorable(item, f"{path}[{index}]")
            if found[1]:
                return found
    return path, ""


def check_timestamp(value: Any, field: str) -> datetime:
    if isinstance(value, datetime):
        return parse_iso(value.isoformat())
    if not isinstance(value, str):
        raise ValueError(f"{field} must be an ISO 8601 timestamp string")
    try:
        return parse_iso(value)
    except ValueError:
        raise ValueError(f"{field} must be an ISO 8601 timestamp, got {value!r}") from None


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
)


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
    ) = values
    wire: dict[str, Any] = {"sender": sender, "text": text}
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


# -- inbox items --------------------------------------------------------------------------


def inbox_item_fields(item: CoreInboxItem) -> dict[str, Any]:
    """Column values of a runtime inbox item, validated. Raises ValueError."""
    if not isinstance(item, CoreInboxItem):
        raise ValueError(f"item must be an InboxItem, got {type(item).__name__}")
    if item.status not in INBOX_STATUSES:
        raise ValueError(f"status must be one of {', '.join(INBOX_STATUSES)}, got {item.status!r}")
    if item.response is not None:
        check_text(item.response, "response")
    if not isinstance(item.blocking, bool):
        raise ValueError("blocking must be true or false")
    return {
        "id": check_text(item.id, "id", allow_empty=False, max_length=MAX_ID),
        "tag": check_text(item.tag, "tag", allow_empty=False, max_length=MAX_TAG),
        "request": check_text(item.request, "request"),
        "response": item.response,
        "status": item.status,
        "blocking": item.blocking,
        "created_at": check_timestamp(item.created_at, "created_at"),
        "resolved_at": (
            check_timestamp(item.resolved_at, "resolved_at") if item.resolved_at else None
        ),
    }


def inbox_item_to_core(row: InboxItem) -> CoreInboxItem:
    return CoreInboxItem(
        id=row.id,
        tag=row.tag,
        request=row.request,
        response=row.response,
        status=row.status,  # type: ignore[arg-type]
        blocking=row.blocking,
        created_at=iso_format(row.created_at),
        resolved_at=iso_or_none(row.resolved_at),
    )
