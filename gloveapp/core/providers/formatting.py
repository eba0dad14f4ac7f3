"""Glove messages -> provider wire messages (Anthropic Messages, OpenAI Chat Completions).

Mirrors glove-core's `formatAnthropicMessages` / `formatMessages` (contract §1.6) so a
conversation reaches the model exactly as it does under the TypeScript runtime, with one
deliberate change: inside a merged Anthropic user turn the `tool_result` blocks come first.
The blocking reminder is appended after the tool results (Decisions item 2), and Anthropic
rejects a user turn in which text precedes the tool results answering the previous turn.

`render_data` never reaches the model; only `status`, `data` and `message` do.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Iterable
from typing import Any

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.types import ContentPart, Message, ToolCall, ToolResult, ToolResultData

NO_RESULT_TEXT = "No result available"
UNKNOWN_CALL_ID = "_unknown"

# ---------------------------------------------------------------------------------------------
# JSON the way JavaScript writes it


def _js_value(value: Any) -> Any:
    """Normalise a value so `json.dumps` prints what JS `JSON.stringify` would."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None  # JSON.stringify(NaN) === "null"
        if value.is_integer() and abs(value) < 1e21:
            return int(value)  # JS has one number type: 1.0 prints as 1
        return value
    if isinstance(value, dict):
        return {str(key): _js_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_js_value(item) for item in value]
    if hasattr(value, "model_dump"):  # pydantic models returned by tools
        return _js_value(value.model_dump(mode="json"))
    if hasattr(value, "to_dict"):
        return _js_value(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _js_value(dataclasses.asdict(value))
    if isinstance(value, set | frozenset):
        return [_js_value(item) for item in value]
    return str(value)


def js_json(value: Any) -> str:
    """Compact JSON, insertion-ordered keys, non-ASCII kept: JS `JSON.stringify(value)`."""
    return json.dumps(_js_value(value), separators=(",", ":"), ensure_ascii=False)


def _js_truthy(value: Any) -> bool:
    """JS truthiness: empty objects and arrays are truthy, 0 / "" / null / NaN are not."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def format_tool_result_content(result: ToolResultData) -> str:
    """The text the model reads for one tool result (§1.6).

    An `aborted` result is formatted like a success, so `data: null` reaches the model as `null`.
    """
    data = result.data
    if result.status == "error":
        detail = (data if isinstance(data, str) else js_json(data)) if _js_truthy(data) else ""
        message = result.message if result.message is not None else "Unknown error"
        return f"Error: {message}\n{detail}".strip()
    return data if isinstance(data, str) else js_json(data)


def _call_id(result: ToolResult) -> str:
    return result.call_id or UNKNOWN_CALL_ID


# ---------------------------------------------------------------------------------------------
# Tools


def anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}
        for spec in tools
    ]


def openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            },
        }
        for spec in tools
    ]


# ---------------------------------------------------------------------------------------------
# Anthropic


def _anthropic_content_parts(parts: list[ContentPart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        source = part.source
        if part.type == "text":
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif part.type in ("image", "document"):
            if source is None:
                continue
            if source.type == "url":
                wire_source: dict[str, Any] = {"type": "url", "url": source.url}
            else:
                wire_source = {
                    "type": "base64",
                    "media_type": source.media_type,
                    "data": source.data,
                }
            blocks.append({"type": part.type, "source": wire_source})
        elif part.type == "video":
            # Anthropic has no video input; keep a note in context as glove-core does.
            media_type = source.media_type if source else "video"
            blocks.append({"type": "text", "text": f"[Video attachment: {media_type}]"})
    return blocks


def _anthropic_tool_input(call: ToolCall) -> dict[str, Any]:
    """Anthropic insists on an object. OpenAI-compatible models can leave an unparsable string."""
    value = call.input_args
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"input": value}


def _format_anthropic_message(message: Message) -> dict[str, Any]:
    role = "assistant" if message.sender == "agent" else "user"

    if role == "user" and message.tool_results:
        return {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": _call_id(result),
                    "content": format_tool_result_content(result.result),
                    "is_error": result.result.status == "error",
                }
                for result in message.tool_results
            ],
        }

    if role == "assistant" and message.tool_calls:
        content: list[dict[str, Any]] = []
        if message.text:
            content.append({"type": "text", "text": message.text})
        for call in message.tool_calls:
            content.append(
                {
                    "type": "tool_use",
                    # A missing id is minted here, so its result (`_unknown`) never matches (§10.16).
                    "id": call.id or f"toolu_{uuid.uuid4()}",
                    "name": call.tool_name,
                    "input": _anthropic_tool_input(call),
                }
            )
        return {"role": "assistant", "content": content}

    if message.content:
        return {"role": role, "content": _anthropic_content_parts(message.content)}

    return {"role": role, "content": message.text}


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}]


def _is_empty(content: str | list[dict[str, Any]]) -> bool:
    return len(content) == 0


def _tool_results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = [block for block in blocks if block.get("type") == "tool_result"]
    if not results:
        return blocks
    return results + [block for block in blocks if block.get("type") != "tool_result"]


def _dedupe_tool_results(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "tool_result":
            if block["tool_use_id"] in seen:
                continue
            seen.add(block["tool_use_id"])
        kept.append(block)
    return kept


def format_anthropic_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Glove messages -> the `messages` array of an Anthropic Messages request."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        formatted = _format_anthropic_message(message)
        if _is_empty(formatted["content"]):
            # An empty turn (a reply that was cut off with no text) would be rejected by the API;
            # glove-core sends it anyway. Dropping it keeps the request valid.
            continue
        previous = merged[-1] if merged else None
        if previous is not None and previous["role"] == formatted["role"]:
            previous["content"] = _as_blocks(previous["content"]) + _as_blocks(formatted["content"])
        else:
            merged.append(formatted)

    for turn in merged:
        if turn["role"] == "user" and isinstance(turn["content"], list):
            turn["content"] = _tool_results_first(_dedupe_tool_results(turn["content"]))

    # Every tool_use needs a tool_result in the next turn; patch the ones an abort left open.
    index = 0
    while index < len(merged):
        turn = merged[index]
        index += 1
        if turn["role"] != "assistant" or not isinstance(turn["content"], list):
            continue
        tool_use_ids = [block["id"] for block in turn["content"] if block["type"] == "tool_use"]
        if not tool_use_ids:
            continue
        following = merged[index] if index < len(merged) else None
        if following is None or following["role"] != "user":
            merged.insert(
                index,
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call_id, "content": NO_RESULT_TEXT}
                        for call_id in tool_use_ids
                    ],
                },
            )
            continue
        blocks = _as_blocks(following["content"])
        answered = {block["tool_use_id"] for block in blocks if block["type"] == "tool_result"}
        patches = [
            {"type": "tool_result", "tool_use_id": call_id, "content": NO_RESULT_TEXT}
            for call_id in tool_use_ids
            if call_id not in answered
        ]
        if patches:
            following["content"] = _tool_results_first(blocks + patches)
    return merged


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible chat completions


def _openai_content_parts(parts: list[ContentPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        source = part.source
        if part.type == "text":
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif part.type == "image":
            if source is None:
                continue
            url = (
                source.url
                if source.type == "url"
                else f"data:{source.media_type};base64,{source.data}"
            )
            out.append({"type": "image_url", "image_url": {"url": url}})
        elif part.type == "document":
            media_type = source.media_type if source else "document"
            out.append({"type": "text", "text": f"[Document attachment: {media_type}]"})
        elif part.type == "video":
            # Chat Completions has no video part (glove-core sends it as image_url, which fails).
            media_type = source.media_type if source else "video"
            out.append({"type": "text", "text": f"[Video attachment: {media_type}]"})
    return out


def _tool_arguments(call: ToolCall) -> str:
    if isinstance(call.input_args, str):
        return call.input_args
    return js_json(call.input_args if call.input_args is not None else {})


def _format_openai_message(message: Message, echo_reasoning: bool) -> list[dict[str, Any]]:
    role = "assistant" if message.sender == "agent" else "user"

    if role == "user" and message.tool_results:
        return [
            {
                "role": "tool",
                "tool_call_id": _call_id(result),
                "content": format_tool_result_content(result.result),
            }
            for result in message.tool_results
        ]

    if role == "assistant" and message.tool_calls:
        out: dict[str, Any] = {
            "role": "assistant",
            "content": message.text or None,
            "tool_calls": [
                {
                    "id": call.id or f"call_{uuid.uuid4()}",
                    "type": "function",
                    "function": {"name": call.tool_name, "arguments": _tool_arguments(call)},
                }
                for call in message.tool_calls
            ],
        }
        if echo_reasoning and message.reasoning_content:
            out["reasoning_content"] = message.reasoning_content
        return [out]

    if role == "assistant" and echo_reasoning and message.reasoning_content:
        return [
            {
                "role": "assistant",
                "content": message.text,
                "reasoning_content": message.reasoning_content,
            }
        ]

    if role == "user" and message.content:
        return [{"role": "user", "content": _openai_content_parts(message.content)}]

    return [{"role": role, "content": message.text}]


def _merge_user_content(previous: Any, new: Any) -> Any:
    """Plain texts join with a newline (glove-core); media parts are kept rather than stringified."""
    if isinstance(previous, str) and isinstance(new, str):
        return previous + "\n" + new

    def parts(content: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)

    return parts(previous) + parts(new)


def format_openai_messages(
    messages: Iterable[Message],
    system_prompt: str | None = None,
    *,
    echo_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Glove messages -> the `messages` array of a Chat Completions request, system prompt first.

    `echo_reasoning` sends a turn's `reasoning_content` back, which DeepSeek/MiMo-style
    reasoning models require on tool-calling turns and others may reject.
    """
    flat: list[dict[str, Any]] = []
    for message in messages:
        flat.extend(_format_openai_message(message, echo_reasoning))

    merged: list[dict[str, Any]] = []
    for entry in flat:
        previous = merged[-1] if merged else None
        if previous is not None and previous["role"] == "user" and entry["role"] == "user":
            previous["content"] = _merge_user_content(previous["content"], entry["content"])
        else:
            merged.append(entry)

    seen_ids: set[str] = set()
    deduped: list[dict[str, Any]] = []
    for entry in merged:
        if entry["role"] == "tool":
            if entry["tool_call_id"] in seen_ids:
                continue
            seen_ids.add(entry["tool_call_id"])
        deduped.append(entry)

    repaired: list[dict[str, Any]] = []
    for index, entry in enumerate(deduped):
        repaired.append(entry)
        if entry["role"] != "assistant" or not entry.get("tool_calls"):
            continue
        found: set[str] = set()
        following = index + 1
        while following < len(deduped) and deduped[following]["role"] == "tool":
            found.add(deduped[following]["tool_call_id"])
            following += 1
        for call in entry["tool_calls"]:
            if call["id"] not in found:
                repaired.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": NO_RESULT_TEXT}
                )

    if system_prompt:
        repaired.insert(0, {"role": "system", "content": system_prompt})
    return repaired
