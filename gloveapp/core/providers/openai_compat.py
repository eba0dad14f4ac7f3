"""OpenAI Chat Completions adapter (official `openai` SDK, AsyncOpenAI).

Works with anything that speaks the Chat Completions wire format: OpenAI, OpenRouter, Ollama,
vLLM, LM Studio, DeepSeek... Pick the server with `base_url`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai

from gloveapp.core.abort import AbortSignal
from gloveapp.core.providers._support import (
    LoopBoundClient,
    response_payload,
    run_abortable,
    sdk_client_options,
)
from gloveapp.core.providers.base import Notify, ToolSpec
from gloveapp.core.providers.errors import ModelProviderError
from gloveapp.core.providers.formatting import format_openai_messages, openai_tools
from gloveapp.core.types import Message, ModelResult, ToolCall


class OpenAICompatModel:
    """A Glove model adapter for OpenAI-compatible chat completions.

    The system prompt becomes the first `system` message; tools are sent as `function` tools.
    Tool-call arguments are JSON-parsed (kept as the raw string when they don't parse).
    Reasoning traces (`reasoning_content`, or OpenRouter's `reasoning`) are kept on the returned
    message; `echo_reasoning=True` sends them back, which some reasoning models require.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        client: openai.AsyncOpenAI | None = None,
        *,
        provider: str = "openai",
        max_tokens: int | None = None,
        echo_reasoning: bool = False,
        include_usage: bool = True,
        extra_body: dict[str, Any] | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        name: str | None = None,
    ) -> None:
        self.provider = provider
        self.name = name or f"{provider}:{model}"
        self.model = model
        self.stream = stream
        self.max_tokens = max_tokens
        self.echo_reasoning = echo_reasoning
        # Some older servers reject `stream_options`; they can turn usage reporting off.
        self.include_usage = include_usage
        self.extra_body = dict(extra_body or {})
        self.system_prompt: str | None = None
        self.base_url = base_url  # None: the SDK's default (or its *_BASE_URL variable)

        options = sdk_client_options(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._clients = LoopBoundClient(lambda: openai.AsyncOpenAI(**options), client)

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text

    def build_request(
        self, messages: list[Message], tools: list[ToolSpec] | None
    ) -> dict[str, Any]:
        """The request body (without streaming options)."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": format_openai_messages(
                messages, self.system_prompt, echo_reasoning=self.echo_reasoning
            ),
        }
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if tools:
            params["tools"] = openai_tools(tools)
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    async def prompt(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None,
        notify: Notify,
        abort: AbortSignal | None = None,
    ) -> ModelResult:
        params = self.build_request(messages, tools)
        call = self._prompt_streaming if self.stream else self._prompt_once
        return await run_abortable(call(params, notify), abort)

    async def _prompt_once(self, params: dict[str, Any], notify: Notify) -> ModelResult:
        try:
            response = await self._clients.get().chat.completions.create(**params)
        except openai.OpenAIError as error:
            raise _provider_error(self.provider, error) from error
        if not response.choices:
            raise ModelProviderError(self.provider, "the response has no choices")
        choice = response.choices[0]
        reply = choice.message
        calls = [
            ToolCall(
                tool_name=call.function.name,
                input_args=parse_arguments(call.function.arguments),
                id=call.id,
            )
            for call in reply.tool_calls or []
            if call.type == "function"
        ]
        result = _result(
            text=reply.content or "",
            calls=calls,
            reasoning=_reasoning_of(reply),
            stop_reason=choice.finish_reason,
            usage=response.usage,
        )
        await notify("model_response", response_payload(result))
        return result

    async def _prompt_streaming(self, params: dict[str, Any], notify: Notify) -> ModelResult:
        params = {**params, "stream": True}
        if self.include_usage:
            params["stream_options"] = {"include_usage": True}
        text_parts: list[str] = []
        reasoning_parts: list[str] = []
        # Tool calls arrive as fragments keyed by index: id and name first, arguments in pieces.
        pending: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        usage: Any = None
        try:
            stream = await self._clients.get().chat.completions.create(**params)
            try:
                chunks = stream.__aiter__()
                while (chunk := await _next_chunk(self.provider, chunks)) is not None:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        reasoning_parts.append(reasoning)
                    if delta.content:
                        text_parts.append(delta.content)
                        await notify("text_delta", {"text": delta.content})
                    for fragment in delta.tool_calls or []:
                        entry = pending.setdefault(
                            fragment.index, {"id": "", "name": "", "arguments": ""}
                        )
                        if fragment.id:
                            entry["id"] = fragment.id
                        function = fragment.function
                        if function is not None:
                            if function.name:
                                entry["name"] = function.name
                            if function.arguments:
                                entry["arguments"] += function.arguments
            finally:
                await stream.close()
        except openai.OpenAIError as error:
            raise _provider_error(self.provider, error) from error

        calls: list[ToolCall] = []
        for index in sorted(pending):
            entry = pending[index]
            call = ToolCall(
                tool_name=entry["name"],
                input_args=parse_arguments(entry["arguments"]),
                id=entry["id"] or f"call_{uuid.uuid4()}",
            )
            calls.append(call)
            await notify(
                "tool_use", {"id": call.id, "name": call.tool_name, "input": call.input_args}
            )

        result = _result(
            text="".join(text_parts),
            calls=calls,
            reasoning="".join(reasoning_parts) or None,
            stop_reason=finish_reason,
            usage=usage,
        )
        await notify("model_response_complete", response_payload(result))
        return result


async def _next_chunk(provider: str, chunks: Any) -> Any:
    """The next stream chunk, None at the end; a failure inside the SDK becomes a provider error.

    Only the SDK runs in here, so subscriber exceptions raised by `notify` propagate unchanged.
    """
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None
    except openai.OpenAIError as error:
        raise _provider_error(provider, error) from error
    except Exception as error:
        # Transport errors such as a connection dropped mid-stream.
        raise ModelProviderError(provider, f"stream failed: {error}") from error


def parse_arguments(raw: str | None) -> Any:
    """Tool-call arguments as JSON; the raw string when the model produced invalid JSON."""
    if raw is None or raw == "":
        # Models calling a tool without parameters often send "" (JSON.parse("") would throw
        # and glove-core would keep ""); an empty object is what the tool expects.
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _reasoning_of(item: Any) -> str | None:
    """`reasoning_content` (DeepSeek, Qwen, vLLM...) or `reasoning` (OpenRouter), not declared by the SDK."""
    for key in ("reasoning_content", "reasoning"):
        value = getattr(item, key, None)
        if isinstance(value, str) and value:
            return value
    return None


def _result(
    *,
    text: str,
    calls: list[ToolCall],
    reasoning: str | None,
    stop_reason: str | None,
    usage: Any,
) -> ModelResult:
    cached = None
    details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
    if details is not None and isinstance(getattr(details, "cached_tokens", None), int):
        cached = details.cached_tokens
    message = Message(
        sender="agent", text=text, tool_calls=calls or None, reasoning_content=reasoning
    )
    return ModelResult(
        messages=[message],
        tokens_in=(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0,
        tokens_out=(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0,
        cache_read_input_tokens=cached,
        stop_reason=stop_reason,
    )


def _provider_error(provider: str, error: openai.OpenAIError) -> ModelProviderError:
    if isinstance(error, openai.APIStatusError):
        inner = _inner_error(error.body)
        message = inner.get("message") if isinstance(inner.get("message"), str) else None
        return ModelProviderError(
            provider,
            message or error.message,
            status=error.status_code,
            error_type=inner.get("type") if isinstance(inner.get("type"), str) else None,
            body=error.body,
        )
    if isinstance(error, openai.APITimeoutError):
        return ModelProviderError(provider, "request timed out")
    if isinstance(error, openai.APIConnectionError):
        return ModelProviderError(provider, f"connection failed: {error.message}")
    if isinstance(error, openai.APIError):
        # An error object sent inside a 200 stream.
        inner = _inner_error(error.body)
        return ModelProviderError(
            provider,
            error.message,
            status=_int_or_none(inner.get("code")),
            error_type=inner.get("type") if isinstance(inner.get("type"), str) else None,
            body=error.body,
        )
    return ModelProviderError(provider, str(error))


def _inner_error(body: Any) -> dict[str, Any]:
    """OpenAI sends `{"error": {...}}`; the SDK sometimes hands over the inner object already."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            return inner
        return body
    return {}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
