"""A fake Anthropic Messages API (`POST /v1/messages`) speaking the real wire format.

with FakeAnthropic() as server:
    server.reply_stream([text("Hello"), tool_use("toolu_1", "check_stock", {"product": "AA"})])
    model = AnthropicModel("claude-test", api_key="k", base_url=server.url, max_retries=0)
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_fake import FakeProvider, Reply, SseEvent, split_evenly

MODEL = "claude-test"


def text(value: str | list[str]) -> dict[str, Any]:
    """A text block; a list streams as those chunks."""
    chunks = [value] if isinstance(value, str) else list(value)
    return {"type": "text", "chunks": chunks}


def tool_use(call_id: str, name: str, input: dict[str, Any], pieces: int = 3) -> dict[str, Any]:
    """A tool_use block; its input JSON streams in `pieces` input_json_delta fragments."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": input, "pieces": pieces}


def _usage(
    input_tokens: int,
    output_tokens: int,
    cache_creation: int | None,
    cache_read: int | None,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
    }


def message_json(
    blocks: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    input_tokens: int = 12,
    output_tokens: int = 7,
    cache_creation: int | None = None,
    cache_read: int | None = None,
    message_id: str = "msg_fake_1",
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "text":
            content.append({"type": "text", "text": "".join(block["chunks"])})
        else:
            content.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            )
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage(input_tokens, output_tokens, cache_creation, cache_read),
    }


def message_events(
    blocks: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    input_tokens: int = 12,
    output_tokens: int = 7,
    cache_creation: int | None = None,
    cache_read: int | None = None,
    message_id: str = "msg_fake_1",
) -> list[SseEvent]:
    """The SSE events of a streamed message, in the order the API sends them."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    events: list[SseEvent] = []

    def emit(name: str, data: dict[str, Any]) -> None:
        events.append((name, json.dumps({"type": name, **data})))

    emit(
        "message_start",
        {
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(input_tokens, 1, cache_creation, cache_read),
            }
        },
    )
    events.append(("ping", json.dumps({"type": "ping"})))
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            emit(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for chunk in block["chunks"]:
                emit(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": chunk}},
                )
        else:
            emit(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            for piece in split_evenly(json.dumps(block["input"]), block["pieces"]):
                emit(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
        emit("content_block_stop", {"index": index})
    emit(
        "message_delta",
        {
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )
    emit("message_stop", {})
    return events


def error_json(error_type: str, message: str, code: str | None = None) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def wire_problem(body: Any) -> str | None:
    """What the real API would reject in a request body, as far as message structure goes."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not messages:
        return "messages: at least one message is required"
    previous_role = None
    open_tool_uses: list[str] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        where = f"messages.{position}"
        if role not in ("user", "assistant"):
            return f"{where}.role: must be user or assistant"
        if role == previous_role:
            return f"{where}: roles must alternate between user and assistant"
        content = message.get("content")
        if content in ("", []) and position != len(messages) - 1:
            return f"{where}: all messages must have non-empty content"
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if open_tool_uses:
                leading = 0
                while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                    leading += 1
                if leading != len(results):
                    return (
                        f"{where}: tool_result blocks must come first in the user message "
                        "that follows tool_use"
                    )
                missing = [i for i in open_tool_uses if i not in results]
                if missing:
                    return (
                        f"{where}: tool_use ids were found without tool_result blocks "
                        f"immediately after: {', '.join(missing)}"
                    )
            unexpected = [i for i in results if i not in open_tool_uses]
            if unexpected:
                return (
                    f"{where}: unexpected tool_use_id found in tool_result blocks: {unexpected[0]}"
                )
            if len(set(results)) != len(results):
                return f"{where}: each tool_use must have a single result"
            open_tool_uses = []
        else:
            if open_tool_uses:
                return f"{where}: tool_use ids were found without tool_result blocks"
            open_tool_uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        for block in blocks:
            if block.get("type") == "text" and not block.get("text") and len(blocks) > 1:
                return f"{where}: text content blocks must be non-empty"
        previous_role = role
    if open_tool_uses:
        return "the last assistant message has tool_use blocks without results"
    return None


class FakeAnthropic(FakeProvider):
    """Also validates message structure like the real API: a malformed request gets a 400."""

    path = "/v1/messages"
    not_found = ("not_found_error", "Not found: {path}")
    server_error_type = "api_error"
    error_json = staticmethod(error_json)
    wire_problem = staticmethod(wire_problem)

    def reply_json(self, blocks: list[dict[str, Any]], **kwargs: Any) -> None:
        self.enqueue(Reply(json_body=message_json(blocks, **kwargs)))

    def reply_stream(
        self,
        blocks: list[dict[str, Any]],
        *,
        hang_after: int | None = None,
        event_delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.enqueue(
            Reply(
                sse=message_events(blocks, **kwargs),
                hang_after=hang_after,
                event_delay=event_delay,
            )
        )

    def reply_stream_error(
        self, blocks: list[dict[str, Any]], error_type: str, message: str
    ) -> None:
        """A stream that starts normally, then carries an `error` event (e.g. overloaded)."""
        events = message_events(blocks)[:3]
        events.append(("error", json.dumps(error_json(error_type, message))))
        self.enqueue(Reply(sse=events))
