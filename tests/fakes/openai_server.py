"""A fake OpenAI Chat Completions API (`POST /v1/chat/completions`) speaking the wire format.

with FakeOpenAI() as server:
    server.reply_stream(text=["Hel", "lo"], tool_calls=[("call_1", "check_stock", {...})])
    model = OpenAICompatModel("gpt-test", api_key="k", base_url=server.url + "/v1")
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_fake import FakeProvider, Reply, SseEvent, split_evenly

MODEL = "gpt-test"

# (id, name, arguments) where arguments is a dict (JSON-encoded) or a raw string sent verbatim.
ToolCallSpec = tuple[str, str, Any]


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _usage(prompt_tokens: int, completion_tokens: int, cached: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def completion_json(
    text: str | None = None,
    tool_calls: list[ToolCallSpec] | None = None,
    *,
    finish_reason: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 6,
    cached: int | None = None,
    reasoning_content: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": _arguments(arguments)},
            }
            for call_id, name, arguments in tool_calls
        ]
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": _usage(prompt_tokens, completion_tokens, cached),
    }


def _chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> str:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    )
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": choices,
            **extra,
        }
    )


def completion_events(
    text: list[str] | None = None,
    tool_calls: list[ToolCallSpec] | None = None,
    *,
    finish_reason: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 6,
    cached: int | None = None,
    reasoning: list[str] | None = None,
    reasoning_key: str = "reasoning_content",
    include_usage: bool = True,
    argument_pieces: int = 3,
) -> list[SseEvent]:
    events: list[SseEvent] = [(None, _chunk({"role": "assistant", "content": ""}))]
    for piece in reasoning or []:
        events.append((None, _chunk({reasoning_key: piece})))
    for piece in text or []:
        events.append((None, _chunk({"content": piece})))
    for index, (call_id, name, arguments) in enumerate(tool_calls or []):
        events.append(
            (
                None,
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                ),
            )
        )
        for piece in split_evenly(_arguments(arguments), argument_pieces):
            events.append(
                (
                    None,
                    _chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                )
            )
    events.append((None, _chunk({}, finish_reason or ("tool_calls" if tool_calls else "stop"))))
    if include_usage:
        events.append((None, _chunk(None, usage=_usage(prompt_tokens, completion_tokens, cached))))
    events.append((None, "[DONE]"))
    return events


def error_json(
    error_type: str, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def wire_problem(body: Any) -> str | None:
    """What the real API would reject in a request body, as far as message structure goes."""
    if not isinstance(body, dict) or "model" not in body or not body.get("messages"):
        return "model and messages are required"
    messages = body["messages"]
    awaiting: list[str] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{position}]"
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in awaiting:
                return (
                    f"Invalid parameter: {where} with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            awaiting.remove(call_id)
            continue
        if awaiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(awaiting)}"
            )
        if role not in ("system", "developer", "user", "assistant"):
            return f"Invalid value for {where}.role: {role!r}"
        if role == "assistant":
            awaiting = [call["id"] for call in message.get("tool_calls") or []]
    if awaiting:
        return f"tool_calls without responses: {', '.join(awaiting)}"
    return None


class FakeOpenAI(FakeProvider):
    """Also validates tool-message structure like the real API: a malformed request gets a 400."""

    path = "/v1/chat/completions"
    not_found = ("invalid_request_error", "Unknown url {path}")
    server_error_type = "server_error"
    error_json = staticmethod(error_json)
    wire_problem = staticmethod(wire_problem)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def reply_json(
        self, text: str | None = None, tool_calls: list[ToolCallSpec] | None = None, **kwargs: Any
    ) -> None:
        self.enqueue(Reply(json_body=completion_json(text, tool_calls, **kwargs)))

    def reply_stream(
        self,
        text: list[str] | None = None,
        tool_calls: list[ToolCallSpec] | None = None,
        *,
        hang_after: int | None = None,
        event_delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.enqueue(
            Reply(
                sse=completion_events(text, tool_calls, **kwargs),
                hang_after=hang_after,
                event_delay=event_delay,
            )
        )
