"""The data the Glove runtime passes around, with Glove's JSON wire format.

Field names on the wire follow glove-core exactly (`tool_calls`, `input_args`, `activeForm`,
`renderData`, `is_compaction`, ...) so that stores, REST clients and glove-react frontends
exchange the same JSON. Python attributes are snake_case; `to_dict`/`from_dict` translate.
Optional fields are left out of the JSON when unset, as JS leaves `undefined` keys out.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import string
import time
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel

Sender = Literal["user", "agent"]
ToolStatus = Literal["success", "error", "aborted"]
TaskStatus = Literal["pending", "in_progress", "completed"]
InboxStatus = Literal["pending", "resolved", "consumed"]
PermissionStatus = Literal["granted", "denied", "unset"]
# The one list of permission statuses (services, serializers and the schema read it).
PERMISSION_STATUSES: tuple[str, ...] = typing.get_args(PermissionStatus)

TASK_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")
INBOX_STATUSES: tuple[str, ...] = ("pending", "resolved", "consumed")
TOOL_STATUSES: tuple[str, ...] = ("success", "error", "aborted")

_BASE36 = string.digits + string.ascii_lowercase


def now_iso() -> str:
    """The current UTC time as JS `toISOString()` prints it: `2026-05-25T18:22:14.123Z`."""
    # isoformat is several times faster than strftime, and "now" always has a 4-digit year.
    return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


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


def json_safe(value: Any) -> Any:
    """`value` as plain JSON data, the way JS `JSON.stringify` would see it.

    Tool results are persisted as JSON, so anything a tool returns must survive
    `json.dumps(..., allow_nan=False)`: dict keys become strings; lists, tuples and sets become
    lists; NaN and ±inf become None (JSON.stringify's `null`); a finite Decimal becomes a float;
    a datetime becomes ISO 8601 UTC with milliseconds and `Z`, a date or time its isoformat;
    a pydantic model and a dataclass field by field; anything else becomes
    `str(value)`. A reference cycle becomes the string `[Circular]` instead of recursing.
    """
    return _json_safe(value, set())


def _json_safe(value: Any, active: set[int]) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, datetime):
        return iso_format(value)
    if isinstance(value, date | time_of_day):
        return value.isoformat()
    marker = id(value)
    if marker in active:
        return "[Circular]"
    active.add(marker)
    try:
        if isinstance(value, Mapping):
            return {_json_key(key): _json_safe(item, active) for key, item in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [_json_safe(item, active) for item in value]
        if isinstance(value, BaseModel):
            # Python-mode dump, then our rules: datetimes and Decimals inside a model come
            # out the same as anywhere else.
            return _json_safe(value.model_dump(), active)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {
                f.name: _json_safe(getattr(value, f.name), active)
                for f in dataclasses.fields(value)
            }
    finally:
        active.discard(marker)
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    safe = _json_safe(key, set())
    return safe if isinstance(safe, str) else str(safe if safe is not None else "null")


def random_base36(length: int) -> str:
    return "".join(secrets.choice(_BASE36) for _ in range(length))


def epoch_ms() -> int:
    return int(time.time() * 1000)


def new_inbox_item_id() -> str:
    """`inbox_{epochMs}_{6 base-36 chars}`, Glove's id shape."""
    return f"inbox_{epoch_ms()}_{random_base36(6)}"


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


def _unknown_keys(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The keys of a wire dict the runtime does not interpret, kept verbatim.

    Glove's JSON grows (4.1.0 added `provider_options`, `pre_modified_text`, `content[].name`,
    `generateSummaryArgs`); a store that dropped what it does not know would break the
    clients that wrote it, e.g. providers that need their `provider_options` echoed back.
    """
    return {key: value for key, value in data.items() if key not in known}


def _with_extra(data: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    # Known fields win: an extra can never shadow what the runtime wrote.
    for key, value in extra.items():
        data.setdefault(key, value)
    return data


@dataclass(slots=True)
class ContentSource:
    type: Literal["base64", "url"]
    media_type: str
    data: str | None = None
    url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset({"type", "media_type", "data", "url"})

    def to_dict(self) -> dict[str, Any]:
        return _with_extra(
            _drop_none(
                {
                    "type": self.type,
                    "media_type": self.media_type,
                    "data": self.data,
                    "url": self.url,
                }
            ),
            self.extra,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentSource:
        return cls(
            type=data["type"],
            media_type=data["media_type"],
            data=data.get("data"),
            url=data.get("url"),
            extra=_unknown_keys(data, cls.KNOWN),
        )


@dataclass(slots=True)
class ContentPart:
    """One part of a multimodal user message."""

    type: Literal["text", "image", "video", "document"]
    text: str | None = None
    source: ContentSource | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset({"type", "text", "source"})

    def to_dict(self) -> dict[str, Any]:
        return _with_extra(
            _drop_none(
                {
                    "type": self.type,
                    "text": self.text,
                    "source": self.source.to_dict() if self.source else None,
                }
            ),
            self.extra,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentPart:
        source = data.get("source")
        return cls(
            type=data["type"],
            text=data.get("text"),
            source=ContentSource.from_dict(source) if source else None,
            extra=_unknown_keys(data, cls.KNOWN),
        )


@dataclass(slots=True)
class ToolCall:
    tool_name: str
    input_args: Any = None
    id: str | None = None
    # e.g. glove-core 4.1.0's `provider_options`, which its adapters echo back next turn.
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset({"tool_name", "input_args", "id"})

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.id is not None:
            data["id"] = self.id
        data["tool_name"] = self.tool_name
        data["input_args"] = self.input_args
        return _with_extra(data, self.extra)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(
            tool_name=data["tool_name"],
            input_args=data.get("input_args"),
            id=data.get("id"),
            extra=_unknown_keys(data, cls.KNOWN),
        )


@dataclass(slots=True)
class ToolResultData:
    """What a tool returns. `render_data` is for the UI only and never reaches the model."""

    status: ToolStatus
    data: Any = None
    message: str | None = None
    render_data: Any = None
    summary: str | None = None
    # e.g. glove-core's `generateSummaryArgs`.
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset({"status", "data", "message", "renderData", "render_data", "summary"})

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
        return _with_extra(data, self.extra)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResultData:
        return cls(
            status=data["status"],
            data=data.get("data"),
            message=data.get("message"),
            render_data=data.get("renderData", data.get("render_data")),
            summary=data.get("summary"),
            extra=_unknown_keys(data, cls.KNOWN),
        )


@dataclass(slots=True)
class ToolResult:
    tool_name: str
    result: ToolResultData
    call_id: str | None = None
    duration_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset({"tool_name", "result", "call_id", "duration_ms"})

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tool_name": self.tool_name}
        if self.call_id is not None:
            data["call_id"] = self.call_id
        data["result"] = self.result.to_dict()
        if self.duration_ms is not None:
            data["duration_ms"] = self.duration_ms
        return _with_extra(data, self.extra)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        return cls(
            tool_name=data["tool_name"],
            result=ToolResultData.from_dict(data["result"]),
            call_id=data.get("call_id"),
            duration_ms=data.get("duration_ms"),
            extra=_unknown_keys(data, cls.KNOWN),
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
    # Every field of Glove's message JSON the runtime does not interpret (glove-core 4.1.0's
    # `provider_options`, `pre_modified_text`, and whatever comes next), kept verbatim.
    extra: dict[str, Any] = field(default_factory=dict)

    KNOWN = frozenset(
        {
            "sender",
            "id",
            "text",
            "content",
            "tool_calls",
            "tool_results",
            "is_compaction",
            "is_compaction_request",
            "is_skill_injection",
            "framework_context",
            "reasoning_content",
        }
    )

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
        return _with_extra(data, self.extra)

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
            extra=_unknown_keys(data, cls.KNOWN),
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
    # The decisions a person may take (gloveapp.core.approvals.inbox.INBOX_DECISIONS); None is
    # Glove's text response only, and then the wire form is Glove's, without the key.
    decisions: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "tag": self.tag,
            "request": self.request,
            "response": self.response,
            "status": self.status,
            "blocking": self.blocking,
            "created_at": self.created_at,
            "resolved_at": self.resolved_at,
        }
        if self.decisions:
            data["decisions"] = list(self.decisions)
        return data

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
            decisions=tuple(data["decisions"]) if data.get("decisions") else None,
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
