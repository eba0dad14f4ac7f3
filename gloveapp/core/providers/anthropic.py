"""Anthropic Messages API adapter (official `anthropic` SDK, AsyncAnthropic)."""

from __future__ import annotations

from typing import Any

import anthropic

from gloveapp.core.abort import AbortSignal
from gloveapp.core.providers._support import (
    LoopBoundClient,
    response_payload,
    run_abortable,
    sdk_client_options,
)
from gloveapp.core.providers.base import Notify, ToolSpec
from gloveapp.core.providers.errors import ModelProviderError
from gloveapp.core.providers.formatting import anthropic_tools, format_anthropic_messages
from gloveapp.core.types import Message, ModelResult, ToolCall

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 8192

# Errors delivered inside a 200 streaming response carry only a type; map it to the status the
# same error has as an HTTP response so `ModelProviderError.retryable` stays meaningful.
_STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicModel:
    """A Glove model adapter for Claude.

    The system prompt is sent as the request's `system` field and tools as Anthropic tools.
    Streaming (the default) emits `text_delta` per text chunk, `tool_use` as each tool block
    completes, then `model_response_complete`; non-streaming emits one `model_response`.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        stream: bool = True,
        client: anthropic.AsyncAnthropic | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        name: str | None = None,
    ) -> None:
        self.name = name or f"{PROVIDER}:{model}"
        self.model = model
        self.max_tokens = max_tokens
        self.stream = stream
        self.system_prompt: str | None = None
        self.base_url = base_url  # None: the SDK's default (or its *_BASE_URL variable)

        options = sdk_client_options(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._clients = LoopBoundClient(lambda: anthropic.AsyncAnthropic(**options), client)

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text

    def build_request(
        self, messages: list[Message], tools: list[ToolSpec] | None
    ) -> dict[str, Any]:
        """The request body (without `stream`); public so callers can inspect what is sent."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": format_anthropic_messages(messages),
        }
        if self.system_prompt:
            params["system"] = self.system_prompt
        if tools:
            params["tools"] = anthropic_tools(tools)
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
            response = await self._clients.get().messages.create(**params)
        except anthropic.AnthropicError as error:
            raise _provider_error(error) from error
        result = _to_result(response)
        await notify("model_response", response_payload(result))
        return result

    async def _prompt_streaming(self, params: dict[str, Any], notify: Notify) -> ModelResult:
        try:
            async with self._clients.get().messages.stream(**params) as stream:
                events = stream.__aiter__()
                finished = False
                while (event := await _next_event(events)) is not None:
                    # Subscribers run outside the SDK's error translation: their exceptions
                    # propagate unchanged.
                    if event.type == "text":
                        await notify("text_delta", {"text": event.text})
                    elif (
                        event.type == "content_block_stop"
                        and event.content_block.type == "tool_use"
                    ):
                        block = event.content_block
                        await notify(
                            "tool_use", {"id": block.id, "name": block.name, "input": block.input}
                        )
                    elif event.type == "message_stop":
                        finished = True
                if not finished:
                    # The connection closed mid-message: don't pass a truncated reply off as whole.
                    raise ModelProviderError(PROVIDER, "the stream ended before message_stop")
                final = await stream.get_final_message()
        except anthropic.AnthropicError as error:
            raise _provider_error(error) from error
        result = _to_result(final)
        await notify("model_response_complete", response_payload(result))
        return result


async def _next_event(events: Any) -> Any:
    """The next stream event, None at the end; any failure inside the SDK becomes a provider error."""
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None
    except anthropic.AnthropicError as error:
        raise _provider_error(error) from error
    except Exception as error:
        # Transport errors (a dropped connection) and unparsable tool-input JSON.
        raise ModelProviderError(PROVIDER, f"stream failed: {error}") from error


def _to_result(response: Any) -> ModelResult:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(tool_name=block.name, input_args=block.input, id=block.id))
    usage = response.usage
    return ModelResult(
        messages=[Message(sender="agent", text="".join(texts), tool_calls=calls or None)],
        tokens_in=usage.input_tokens or 0,
        tokens_out=usage.output_tokens or 0,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
        stop_reason=response.stop_reason,
    )


def _provider_error(error: anthropic.AnthropicError) -> ModelProviderError:
    if isinstance(error, anthropic.APIStatusError):
        body = error.body
        error_type = _error_field(body, "type")
        message = _error_field(body, "message") or error.message
        status = error.status_code
        if status < 400:
            status = _STREAM_ERROR_STATUS.get(error_type or "", 500)
        return ModelProviderError(
            PROVIDER, message, status=status, error_type=error_type, body=body
        )
    if isinstance(error, anthropic.APITimeoutError):
        return ModelProviderError(PROVIDER, "request timed out")
    if isinstance(error, anthropic.APIConnectionError):
        return ModelProviderError(PROVIDER, f"connection failed: {error.message}")
    return ModelProviderError(PROVIDER, str(error))


def _error_field(body: Any, key: str) -> str | None:
    """`{"type": "error", "error": {"type": ..., "message": ...}}` -> one inner field."""
    if isinstance(body, dict):
        inner = body.get("error")
        field = inner.get(key) if isinstance(inner, dict) else None
        if isinstance(field, str):
            return field
    return None
