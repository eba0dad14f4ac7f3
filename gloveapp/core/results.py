"""Bounded tool results: past a cap, the model reads the head of a result with a notice.

A tool (local or MCP) may return anything; what is stored in the conversation, sent back
to the model and drawn on the page is at most `max_bytes` of UTF-8 JSON (the result's data,
message and render data together). A larger result becomes:

- `data`: the head of its JSON text (or of the text itself, when the data is a string),
  followed by `truncated_notice(...)`, which the model reads;
- `message`: cut to the same cap (an error's text may be huge too);
- `render_data`: dropped (the page shows the head from `data`);
- `extra["truncated"]`: `{"bytes": <whole size>, "shownBytes": <head size>}` for the page.

The whole result, as JSON text, goes to the store's optional `keep_tool_result(call_id,
tool_name, whole)` (the Django store keeps it for a download by the session's owner and
staff); a store without it keeps only the head.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Protocol

from gloveapp.core.types import ToolResultData

if TYPE_CHECKING:
    from typing_extensions import TypeIs

# 64 KiB: well past any result a model reads with profit (about 16k tokens), small enough
# that a page or the messages API never carries megabytes for one call.
MAX_TOOL_RESULT_BYTES = 64 * 1024


def truncated_notice(total: int, shown: int) -> str:
    return (
        f"\n\n[Result truncated: the tool returned {total:,} bytes; only the first "
        f"{shown:,} are shown. Ask for a narrower result if you need more.]"
    )


def _size(result: ToolResultData) -> int:
    body = {"data": result.data, "message": result.message, "renderData": result.render_data}
    return len(json.dumps(body, ensure_ascii=False).encode("utf-8"))


def head(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 form fits `max_bytes` (never half a
    character)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def bound_result(
    result: ToolResultData, max_bytes: int = MAX_TOOL_RESULT_BYTES
) -> tuple[ToolResultData, str | None]:
    """(the result within `max_bytes`, the whole as JSON text when it was cut, else None).

    `result` must already be JSON-safe (`types.json_safe`)."""
    total = _size(result)
    if total <= max_bytes:
        return result, None
    whole = json.dumps(
        {
            "status": result.status,
            "data": result.data,
            "message": result.message,
            "renderData": result.render_data,
        },
        ensure_ascii=False,
    )
    # The head leaves room for the notice and the message within the cap.
    budget = max(1024, max_bytes - 1024)
    message = result.message
    if message is not None and len(message.encode("utf-8")) > budget // 4:
        message = head(message, budget // 4) + " […]"
    if message is not None:
        budget -= len(message.encode("utf-8"))
    source = (
        result.data
        if isinstance(result.data, str)
        else json.dumps(
            result.data if result.data is not None else result.render_data, ensure_ascii=False
        )
    )
    shown = head(source, max(0, budget))
    shown_bytes = len(shown.encode("utf-8"))
    bounded = dataclasses.replace(
        result,
        data=shown + truncated_notice(total, shown_bytes),
        message=message,
        render_data=None,
        extra={**result.extra, "truncated": {"bytes": total, "shownBytes": shown_bytes}},
    )
    return bounded, whole


class ResultKeepingStore(Protocol):
    """A store that keeps the whole of a cut tool result for download (optional)."""

    async def keep_tool_result(self, call_id: str, tool_name: str, whole: str) -> None: ...


def supports_keeping_results(store: object) -> TypeIs[ResultKeepingStore]:
    return callable(getattr(store, "keep_tool_result", None))


async def keep_whole(store: object, *, call_id: str | None, tool_name: str, whole: str) -> None:
    """Hand the whole of a cut result to the store, if it keeps them; a failure to keep it
    loses only the download, never the call's (bounded) result."""
    if call_id and supports_keeping_results(store):
        await store.keep_tool_result(call_id, tool_name, whole)
