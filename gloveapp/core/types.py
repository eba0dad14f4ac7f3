"""The data the Glove runtime passes around, with Glove's JSON wire format.

Field names on the wire follow glove-core exactly (`tool_calls`, `input_args`, `activeForm`,
`renderData`, `is_compaction`, ...) so that stores, REST clients and glove-react frontends
exchange the same JSON. Python attributes are snake_case; `to_dict`/`from_dict` translate.
Optional fields are left out of the JSON when unset, as JS leaves `undefined` keys out.
"""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Sender = Literal["user", "agent"]
ToolStatus = Literal["success", "error", "aborted"]
TaskStatus = Literal["pending", "in_progress", "completed"]
InboxStatus = Literal["pending", "resolved", "consumed"]
PermissionStatus = Literal["granted", "denied", "unset"]

TASK_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")
INBOX_STATUSES: tuple[str, ...] = ("pending", "resolved", "consumed")
TOOL_STATUSES: tuple[str, ...] = ("success", "error", "aborted")

_BASE36 = string.digits + string.ascii_lowercase


def now_iso() -> str:
    """The current UTC time as JS `toISOString()` prints it: `2026-05-25T18:22:14.123Z`."""
    return iso_format(datetime.now(UTC))


def iso_format(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 timestamp (with `Z` or an offset, or SQL's `YYYY-MM-DD HH:MM:SS`) as UTC."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def random_base36(length: int) -> str:
    return "".join(secrets.choice(_BASE36) for _ in range(length))


def epoch_ms() -> int:
    return int(time.time() * 1000)


def new_inbox_item_id() -> str:
    """`inbox_{epochMs}_{6 base-36 chars}`, Glove's id shape."""
    return f"inbox_{epoch_ms()}_{random_base36(6)}"


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


@dataclass(slots=True)
class ContentSource:
    type: Literal["base64", "url"]
    media_type: str
    data: str | None = None
    url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {"type": self.type, "media_type": self.media_type, "data": self.data, "url": self.url}
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentSource:
        return cls(
            type=data["type"],
            media_type=data["media_type"],
            data=data.get("data"),
            url=data.get("url"),
        )


@dataclass(slots=True)
class ContentPart:
    """One part of a multimodal user message."""

    type: Literal["text", "image", "video", "document"]
    text: str | None = None
    source: ContentSource | None = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "type": self.type,
                "text": self.text,
                "source": self.source.to_dict() if self.source else None,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentPart:
        source = data.get("source")
        return cls(
            type=data["type"],
            text=data.get("text"),
            source=ContentSource.from_dict(source) if source else None,
        )


@dataclass(slots=True)
class ToolCall:
    tool_name: str
    input_args: Any = None
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.id is not None:
            data["id"] = self.id
        data["tool_name"] = self.tool_name
        data["input_args"] = self.input_args
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(
            tool_name=data["tool_name"], input_args=data.get("input_args"), id=data.get("id")
        )


@dataclass(slots=True)
class ToolResultData:
    """What a tool returns. `render_data` is for the UI only and never reaches the model."""

    status: ToolStatus
    data: Any = None
    message: str | None = None
    render_data: Any = None
    summary: str | None = None

    @classmethod
    def success(cls, data: Any = None, *, render_data: Any = None) -> ToolResultData:
        return cls(status="success", data=data, render_data=render_data)

    @classmethod
    def error(cls, message: str, data: Any = None) -> ToolResultData:
        return cls(status="error", data=data, message=message)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "data": self.data}
        if self.message is not None:
            data["message"] = self.message
        if self.render_data is not None:
            data["renderData"] = self.render_data
        if self.summary is not None:
            data["summary"] = self.summary
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultData:
        return cls(
            status=data["status"],
            data=data.get("data"),
            message=data.get("message"),
            render_data=data.get("renderData", data.get("render_data")),
            summary=data.get("summary"),
        )


@dataclass(slots=True)
class ToolResult:
    tool_name: str
    result: ToolResultData
    call_id: str | None = None
    duration_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tool_name": self.tool_name}
        if self.call_id is not None:
            data["call_id"] = self.call_id
        data["result"] = self.result.to_dict()
        if self.duration_ms is not None:
            data["duration_ms"] = self.duration_ms
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        return cls(
            tool_name=data["tool_name"],
            result=ToolResultData.from_dict(data["result"]),
            call_id=data.get("call_id"),
            duration_ms=data.get("duration_ms"),
        )


@dataclass(slots=True)
class Message:
    """The persisted unit of a conversation.

    Tool results ride on a user message whose text is `tool results`. `framework_context`
    marks messages the framework wrote (4.1.0 uses `"inbox"` for inbox injections).
    """

    sender: Sender
    text: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_results: list[ToolResult] | None = None
    content: list[ContentPart] | None = None
    is_compaction: bool = False
    is_compaction_request: bool = False
    is_skill_injection: bool = False
    framework_context: str | None = None
    reasoning_content: str | None = None
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"sender": self.sender}
        if self.id is not None:
            data["id"] = self.id
        data["text"] = self.text
        if self.content is not None:
            data["content"] = [part.to_dict() for part in self.content]
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_results:
            data["tool_results"] = [result.to_dict() for result in self.tool_results]
        if self.is_compaction:
            data["is_compaction"] = True
        if self.is_compaction_request:
            data["is_compaction_request"] = True
        if self.is_skill_injection:
            data["is_skill_injection"] = True
        if self.framework_context is not None:
            data["framework_context"] = self.framework_context
        if self.reasoning_content is not None:
            data["reasoning_content"] = self.reasoning_content
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        sender = data.get("sender")
        if sender not in ("user", "agent"):
            raise ValueError(f"sender must be 'user' or 'agent', got {sender!r}")
        text = data.get("text", "")
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        tool_calls = data.get("tool_calls")
        tool_results = data.get("tool_results")
        content = data.get("content")
        return cls(
            sender=sender,
            text=text,
            tool_calls=[ToolCall.from_dict(c) for c in tool_calls] if tool_calls else None,
            tool_results=[ToolResult.from_dict(r) for r in tool_results] if tool_results else None,
            content=[ContentPart.from_dict(p) for p in content] if content is not None else None,
            is_compaction=bool(data.get("is_compaction", False)),
            is_compaction_request=bool(data.get("is_compaction_request", False)),
            is_skill_injection=bool(data.get("is_skill_injection", False)),
            framework_context=data.get("framework_context"),
            reasoning_content=data.get("reasoning_content"),
            id=data.get("id"),
        )


@dataclass(slots=True)
class Task:
    id: str
    content: str
    active_form: str
    status: TaskStatus = "pending"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "activeForm": self.active_form,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        status = data.get("status", "pending")
        if status not in TASK_STATUSES:
            raise ValueError(f"status must be one of {', '.join(TASK_STATUSES)}, got {status!r}")
        return cls(
            id=data["id"],
            content=data["content"],
            active_form=data.get("activeForm", data.get("active_form", "")),
            status=status,
        )


@dataclass(slots=True)
class InboxItem:
    """A persistent async request: pending -> resolved -> consumed. Timestamps are ISO 8601 UTC."""

    id: str
    tag: str
    request: str
    response: str | None = None
    status: InboxStatus = "pending"
    blocking: bool = False
    created_at: str = field(default_factory=now_iso)
    resolved_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tag": self.tag,
            "request": self.request,
            "response": self.response,
            "status": self.status,
            "blocking": self.blocking,
            "created_at": self.created_at,
            "resolved_at": self.resolved_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboxItem:
        status = data.get("status", "pending")
        if status not in INBOX_STATUSES:
            raise ValueError(f"status must be one of {', '.join(INBOX_STATUSES)}, got {status!r}")
        return cls(
            id=data["id"],
            tag=data["tag"],
            request=data["request"],
            response=data.get("response"),
            status=status,
            blocking=bool(data.get("blocking", False)),
            created_at=data.get("created_at") or now_iso(),
            resolved_at=data.get("resolved_at"),
        )


@dataclass(slots=True)
class TokenUsage:
    """Token counts of one model call (Glove's `TokenConsumptionCounter`)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
                "cache_creation_input_tokens": self.cache_creation_input_tokens,
                "cache_read_input_tokens": self.cache_read_input_tokens,
            }
        )


@dataclass(slots=True)
class ModelResult:
    """What a model adapter returns from one prompt: normally one agent message."""

    messages: list[Message]
    tokens_in: int = 0
    tokens_out: int = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    stop_reason: str | None = None

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
        )


class AbortError(Exception):
    """Raised when a request is aborted (Glove's `AbortError`)."""

    def __init__(self, message: str = "Operation aborted") -> None:
        super().__init__(message)
