"""`POST /api/chat`: the server-side model proxy glove-next's `createChatHandler` provides.

A glove-react app keeps its agent loop in the browser and calls this for each model turn:
request `{systemPrompt, messages, tools}`, answer a `text/event-stream` of `text_delta`,
`tool_use` and one final `done` frame (contract §8.3). Errors inside the stream become a
`done` whose text is `Error: {message}` with zero tokens, as in Glove; bad input is a 400
before any streaming starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from gloveapp.agents.config import configured_model
from gloveapp.api.common.access import ApiView, ChatRateThrottle
from gloveapp.api.common.fields import (
    ErrorSerializer,
    JsonValueField,
    MessageSerializer,
    TextField,
    to_core_message,
)
from gloveapp.api.common.idempotency import (
    IDEMPOTENCY_KEY_PARAMETER,
    REPLAYED_HEADER,
    idempotency_errors,
    request_key,
)
from gloveapp.conversations import idempotency
from gloveapp.core.providers.base import ModelAdapter, ToolSpec
from gloveapp.core.providers.errors import ModelConfigurationError
from gloveapp.core.types import Message, ModelResult

logger = logging.getLogger(__name__)


class EventStreamRenderer(BaseRenderer):
    """Lets a client that asks for `text/event-stream` through; errors still go out as JSON."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context=None):
        return b"" if data is None else json.dumps(data).encode()


class ModelUnavailable(APIException):
    status_code = 503
    default_code = "model_unavailable"


def configured_chat_model() -> ModelAdapter:
    """A fresh adapter per request (adapters hold the system prompt as state).

    The same choice as the pages' agents: `settings.GLOVE_MODEL`, or the offline demo
    model when it is empty, so the endpoint works with no API key. A misconfigured model
    is the server's problem but not a crash: a 503 that says what is wrong.
    """
    try:
        return configured_model()
    except ModelConfigurationError as exc:
        raise ModelUnavailable(f"The chat model is not available: {exc}") from None


def _frame(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def _done_frame(result: ModelResult) -> dict[str, Any]:
    reply = result.messages[-1] if result.messages else Message(sender="agent", text="")
    message: dict[str, Any] = {"sender": "agent", "text": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [call.to_dict() for call in reply.tool_calls]
    if reply.reasoning_content is not None:
        message["reasoning_content"] = reply.reasoning_content
    # Provider state an adapter attached (e.g. `provider_options`) must reach the client,
    # which stores it and sends it back on the next turn.
    for key, value in reply.extra.items():
        message.setdefault(key, value)
    frame: dict[str, Any] = {
        "type": "done",
        "message": message,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
    }
    # Both cache counts, as glove-next sends them (a client adds them to its token tally).
    if result.cache_read_input_tokens is not None:
        frame["cache_read_input_tokens"] = result.cache_read_input_tokens
    if result.cache_creation_input_tokens is not None:
        frame["cache_creation_input_tokens"] = result.cache_creation_input_tokens
    return frame


async def stream_model_turn(
    model: ModelAdapter, messages: list[Message], tools: list[ToolSpec]
) -> AsyncIterator[bytes]:
    """Run one prompt and relay its events as SSE frames, ending with exactly one `done`."""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    streamed_text = False
    announced_tools: set[str] = set()

    async def notify(event_type: str, payload: dict[str, Any]) -> None:
        if event_type == "text_delta":
            await queue.put({"type": "text_delta", "text": payload.get("text", "")})
        elif event_type == "tool_use":
            await queue.put(
                {
                    "type": "tool_use",
                    "id": payload.get("id"),
                    "name": payload.get("name"),
                    "input": payload.get("input"),
                }
            )

    async def run() -> ModelResult:
        try:
            return await model.prompt(messages, tools or None, notify)
        finally:
            await queue.put(None)

    task = asyncio.ensure_future(run())
    try:
        while (event := await queue.get()) is not None:
            if event["type"] == "text_delta":
                streamed_text = True
            else:
                announced_tools.add(str(event["id"]))
            yield _frame(event)
        try:
            result = await task
        except Exception as exc:  # the model failed mid-turn: Glove reports it in `done`
            logger.warning("chat model call failed: %s", exc)
            yield _frame(
                {
                    "type": "done",
                    "message": {"sender": "agent", "text": f"Error: {exc}"},
                    "tokens_in": 0,
                    "tokens_out": 0,
                }
            )
            return
        # Non-streaming adapters only report the final message; replay it as deltas so a
        # streaming UI sees the same frames whichever model is configured.
        reply = result.messages[-1] if result.messages else None
        if reply is not None:
            if reply.text and not streamed_text:
                yield _frame({"type": "text_delta", "text": reply.text})
            for call in reply.tool_calls or []:
                if str(call.id) not in announced_tools:
                    yield _frame(
                        {
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.tool_name,
                            "input": call.input_args,
                        }
                    )
        yield _frame(_done_frame(result))
    finally:
        # The client went away mid-stream: stop paying for tokens nobody reads.
        if not task.done():
            task.cancel()


async def _recorded(frames: AsyncIterator[bytes], claim: Any) -> AsyncIterator[bytes]:
    """Relay the frames and keep them as the key's answer once the stream ended with a
    `done` that is not an error; otherwise give the key up, so a retry asks the model."""
    sent: list[bytes] = []
    try:
        async for frame in frames:
            sent.append(frame)
            yield frame
    finally:
        if sent and _answered(sent[-1]):
            await sync_to_async(idempotency.stream_answered)(
                claim, {"stream": b"".join(sent).decode()}
            )
        else:
            await sync_to_async(idempotency.stream_abandoned)(claim)


def _answered(last_frame: bytes) -> bool:
    frame = json.loads(last_frame.decode().removeprefix("data: "))
    text = str(frame.get("message", {}).get("text", ""))
    failed = (
        text.startswith("Error: ") and not frame.get("tokens_in") and not frame.get("tokens_out")
    )
    return frame.get("type") == "done" and not failed


class ChatApi(ApiView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]
    throttle_classes = [ChatRateThrottle]
    throttle_scope = "chat"

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ChatInput"  # nested serializers all share the name "Input"

        class ToolSerializer(serializers.Serializer):
            class Meta:
                ref_name = "ChatTool"

            name = serializers.RegexField(r"^[A-Za-z0-9_-]{1,128}$")
            description = TextField(required=False, allow_blank=True, default="")
            parameters = JsonValueField(required=False, allow_null=True, default=None)

            def validate_parameters(self, value: Any) -> Any:
                if value is not None and not isinstance(value, dict):
                    raise serializers.ValidationError("must be a JSON schema object")
                return value

        systemPrompt = TextField(required=False, allow_blank=True, default="")
        messages = MessageSerializer(many=True, allow_empty=True)
        tools = ToolSerializer(many=True, required=False, default=list)

    @extend_schema(
        operation_id="chat",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=InputSerializer,
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="`data: {json}` frames: text_delta, tool_use, then one done.",
            ),
            400: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
            503: ErrorSerializer,
        },
    )
    def post(self, request: Request) -> StreamingHttpResponse:
        key = request_key(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        messages = [to_core_message(m) for m in data["messages"]]
        tools = [
            ToolSpec(
                name=t["name"],
                description=t["description"],
                input_schema=t["parameters"] or {"type": "object", "properties": {}},
            )
            for t in data["tools"]
        ]
        claim = None
        if key is not None:
            with idempotency_errors():
                claim, stored = idempotency.stream_claim(
                    user_id=request.user.pk,
                    key=key,
                    scope="chat",
                    fingerprint=idempotency.request_fingerprint(request.data),
                )
            if claim is None:  # a retry: the first answer again, no model call
                response = StreamingHttpResponse(
                    iter([stored["stream"].encode()]), content_type="text/event-stream"
                )
                response[REPLAYED_HEADER] = "true"
                response["Cache-Control"] = "no-cache"
                return response
        try:
            model = configured_chat_model()
        except BaseException:
            if claim is not None:
                idempotency.stream_abandoned(claim)
            raise
        model.set_system_prompt(data["systemPrompt"])
        frames = stream_model_turn(model, messages, tools)
        if claim is not None:
            frames = _recorded(frames, claim)
        response = StreamingHttpResponse(frames, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        # Proxies such as nginx would otherwise buffer the whole stream.
        response["X-Accel-Buffering"] = "no"
        return response
